{
  "variables": {
    "library_source": "<!(node -p \"require('path').relative('.', require('path').join(require('path').dirname(require.resolve('cuda-stream-pool/package.json')), 'src'))\")"
  },
  "target_defaults": {
    "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")", "<(library_source)"],
    "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_REQUIRE_BASIC_FINALIZERS", "NAPI_CPP_EXCEPTIONS", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"],
    "cflags!": ["-fno-exceptions"],
    "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
    "cflags_cc": ["-std=c++17", "-fexceptions", "-Wall", "-Wextra", "-Wno-unused-parameter",
                  "-fvisibility=hidden", "-fvisibility-inlines-hidden",
                  "-include", "<(module_root_dir)/<(library_source)/internal/glibc-compat.h"],
    "libraries": ["-Wl,--no-as-needed", "-l:libdl.so.2", "-l:libpthread.so.0", "-Wl,--as-needed"],
    "ldflags": ["-static-libstdc++", "-Wl,--exclude-libs,ALL", "-Wl,-z,nodelete",
                "-Wl,--version-script=<(module_root_dir)/<(library_source)/internal/exports.map"]
  },
  "targets": [
    {
      "target_name": "cuda_stream_pool_bench",
      "sources": [
        "native/addon.cc",
        "native/driver.cc",
        "native/calls.cc",
        "native/executor.cc",
        "native/graph-baseline.cc",
        "native/wake-observer.cc",
        "<(library_source)/internal/loader.cc",
        "<(library_source)/internal/glibc-compat.cc"
      ]
    }
  ]
}
