{
  "target_defaults": {
    "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
    "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_REQUIRE_BASIC_FINALIZERS", "NAPI_CPP_EXCEPTIONS", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"],
    "cflags!": ["-fno-exceptions"],
    "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
    "cflags_cc": ["-std=c++17", "-fexceptions", "-Wall", "-Wextra", "-Wno-unused-parameter",
                  "-fvisibility=hidden", "-fvisibility-inlines-hidden",
                  "-include", "<(module_root_dir)/src/native/glibc-compat.h"],
    "libraries": ["-Wl,--no-as-needed", "-l:libdl.so.2", "-l:libpthread.so.0", "-Wl,--as-needed"],
    "ldflags": ["-static-libstdc++", "-Wl,--exclude-libs,ALL", "-Wl,-z,nodelete",
                "-Wl,--version-script=<(module_root_dir)/src/native/exports.map"]
  },
  "targets": [
    {
      "target_name": "cuda_stream_pool",
      "sources": [
        "src/native/addon.cc",
        "src/native/loader.cc",
        "src/native/check.cc",
        "src/native/context.cc",
        "src/native/device.cc",
        "src/native/stream.cc",
        "src/native/capture_guard.cc",
        "src/native/event.cc",
        "src/native/completion.cc",
        "src/native/synchronizer.cc",
        "src/native/managed.cc",
        "src/native/module.cc",
        "src/native/pool.cc",
        "src/native/device_buffer.cc",
        "src/native/pinned.cc",
        "src/native/copy.cc",
        "src/native/staging.cc",
        "src/native/memory_pool.cc",
        "src/native/nvrtc.cc",
        "src/native/graph.cc",
        "src/native/glibc-compat.cc"
      ]
    },
    {
      "target_name": "cuda_stream_pool_bench",
      "sources": [
        "src/native/bench/addon.cc",
        "src/native/bench/driver.cc",
        "src/native/bench/calls.cc",
        "src/native/bench/executor.cc",
        "src/native/bench/graph_baseline.cc",
        "src/native/bench/wake_observer.cc",
        "src/native/loader.cc",
        "src/native/glibc-compat.cc"
      ]
    }
  ]
}
