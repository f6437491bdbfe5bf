{
  # Built by scripts/build-native.mjs (only when MPI is installed). The result is
  # native/build/Release/ringreduce_mpi.node, which src/transport/mpi/loader.ts loads.
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
      "dependencies": ["<!(node -p \"require('node-addon-api').targets\"):node_addon_api_except"],
      "defines": ["NAPI_VERSION=8", "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS", "OMPI_SKIP_MPICXX=1", "MPICH_SKIP_MPICXX=1"],
      "cflags": ["<!@(node mpi_flags.mjs cflags)"],
      "cflags_cc": ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "<!@(node mpi_flags.mjs cflags)"],
      "cflags_cc!": ["-fno-exceptions"],
      "libraries": ["<!@(node mpi_flags.mjs libs)", "-ldl"]
    }
  ]
}
