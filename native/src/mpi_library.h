// The process-wide MPI library: made global (RTLD_GLOBAL), initialised and finalised once per
// process, on the engine's worker thread.
#pragma once

#include <string>

namespace ringreduce {

struct MpiWorld {
  int rank = 0;
  int size = 0;
  int threadLevel = 0;
  int tagUpperBound = 0;
  std::string library;  // MPI_Get_library_version, first line
  std::string libraryPath;  // the libmpi that was made global
};

// Promotes libmpi to RTLD_GLOBAL, then MPI_Init_thread(MPI_THREAD_SERIALIZED). Idempotent while
// initialised. Throws std::runtime_error with a message for the user when MPI cannot start, or
// when it was finalised before (MPI can be initialised once per process).
const MpiWorld& InitMpi();

// MPI_Finalize, if initialised and not yet finalised.
void FinalizeMpi();

// "uninitialized" | "initialized" | "finalized"
const char* MpiState();

// Prints `message` and ends the whole MPI job.
[[noreturn]] void AbortMpi(const std::string& message, int code);

// The error string of an MPI error code.
std::string MpiErrorString(int code);

}  // namespace ringreduce
