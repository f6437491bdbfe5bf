{
  # Built by scripts/build-native.mjs (only when MPI is installed). The result is
  # native/build/Release/ringreduce_mpi.node, which src/transport/mpi/loader.ts loads.
  # node-addon-api's C++ exceptions are enabled here (NAPI_CPP_EXCEPTIONS, no -fno-exceptions)
  # rather than through its gyp target node_addon_api_except: a dependency on another .gyp file
  # makes gyp write that file's makefiles beside it (native/node_modules/node-addon-api/, or
  # inside the user's node_modules), outside native/build.
  "targets": [
    {
      "target_name": "ringreduce_mpi",
      "sources": [
        "src/addon.cc",
        "src/comm.cc",
        "src/doorbell.cc",
        "src/mpi_library.cc",
        "src/progress_engine.cc",
        "src/types.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS", "OMPI_SKIP_MPICXX=1", "MPICH_SKIP_MPICXX=1"],
      "cflags!": ["-fno-exceptions"],
      "cflags": ["<!@(node mpi_flags.mjs cflags)"],
      "cflags_cc": ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "<!@(node mpi_flags.mjs cflags)"],
      "cflags_cc!": ["-fno-exceptions"],
      "xcode_settings": { "GCC_ENABLE_CPP_EXCEPTIONS": "YES" },
      "libraries": ["<!@(node mpi_flags.mjs libs)", "-ldl"]
    }
  ]
}
