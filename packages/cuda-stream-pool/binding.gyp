{
  "target_defaults": {
    "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")", "src"],
    "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_REQUIRE_BASIC_FINALIZERS", "NAPI_CPP_EXCEPTIONS", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"],
    "cflags!": ["-fno-exceptions"],
    "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
    "cflags_cc": ["-std=c++17", "-fexceptions", "-Wall", "-Wextra", "-Wno-unused-parameter",
                  "-fvisibility=hidden", "-fvisibility-inlines-hidden",
                  "-include", "<(module_root_dir)/src/internal/glibc-compat.h"],
    "libraries": ["-Wl,--no-as-needed", "-l:libdl.so.2", "-l:libpthread.so.0", "-Wl,--as-needed"],
    "ldflags": ["-static-libstdc++", "-Wl,--exclude-libs,ALL", "-Wl,-z,nodelete",
                "-Wl,--version-script=<(module_root_dir)/src/internal/exports.map"]
  },
  "targets": [
    {
      "target_name": "cuda_stream_pool",
      "sources": [
        "src/binding/binding.cc",
        "src/binding/errors.cc",
        "src/device/device.cc",
        "src/device/partition.cc",
        "src/stream/stream.cc",
        "src/stream/capture.cc",
        "src/stream/event.cc",
        "src/stream/completion.cc",
        "src/stream/copy.cc",
        "src/memory/device-buffer.cc",
        "src/internal/ipc.cc",
        "src/memory/pinned-buffer.cc",
        "src/memory/host-registration.cc",
        "src/memory/managed-buffer.cc",
        "src/memory/memory-pool.cc",
        "src/kernel/program.cc",
        "src/kernel/module.cc",
        "src/graph/graph.cc",
        "src/pool/pool.cc",
        "src/internal/loader.cc",
        "src/internal/context.cc",
        "src/internal/synchronizer.cc",
        "src/internal/staging.cc",
        "src/internal/copy-threads.cc",
        "src/internal/device-faults.cc",
        "src/internal/live-counters.cc",
        "src/internal/markers.cc",
        "src/internal/tickets.cc",
        "src/internal/event-markers.cc",
        "src/internal/poller.cc",
        "src/internal/landing.cc",
        "src/internal/gates.cc",
        "src/internal/handle-table.cc",
        "src/internal/submission.cc",
        "src/internal/fences.cc",
        "src/internal/v8-memory.cc",
        "src/internal/copy-kernel.cc",
        "src/internal/glibc-compat.cc"
      ]
    }
  ]
}
