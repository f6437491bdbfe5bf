#include "mpi_library.h"

#include <dlfcn.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

namespace ringreduce {

namespace {

std::mutex gMutex;
MpiWorld gWorld;
bool gInitialized = false;

// Node loads an addon with RTLD_LOCAL, so libmpi (our dependency) is loaded local too, and the
// plugins Open MPI dlopens at MPI_Init cannot see its symbols. Reopening the same file with
// RTLD_NOLOAD | RTLD_GLOBAL promotes it without loading a second copy.
std::string MakeLibmpiGlobal() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) != 0 && info.dli_fname != nullptr) {
    if (dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) != nullptr) return info.dli_fname;
  }
  for (const char* name : {"libmpi.so.40", "libmpi.so.12", "libmpi.so"}) {
    if (dlopen(name, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) != nullptr) return name;
  }
  return "";
}

std::string FirstLine(const char* text) {
  std::string s(text);
  size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

}  // namespace

const MpiWorld& InitMpi() {
  std::lock_guard<std::mutex> lock(gMutex);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    throw std::runtime_error(
        "MPI was already finalised in this process: the MPI backend can be initialised once per process "
        "(call init() once, and shutdown() at the end)");
  }
  if (gInitialized) return gWorld;
  int already = 0;
  MPI_Initialized(&already);
  gWorld.libraryPath = MakeLibmpiGlobal();
  if (!already) {
    // A rank runs three busy threads (the caller's, the engine's, the progress thread). Open MPI
    // busy-waits inside blocking calls without yielding unless it sees oversubscription, and
    // that starves the threads it waits for: ask it to yield (the user's own setting wins).
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) throw std::runtime_error("MPI_Init_thread failed: " + MpiErrorString(rc));
    gWorld.threadLevel = provided;
  } else {
    MPI_Query_thread(&gWorld.threadLevel);
  }
  if (gWorld.threadLevel < MPI_THREAD_SERIALIZED) {
    throw std::runtime_error(
        "this MPI library provides thread level " + std::to_string(gWorld.threadLevel) +
        " but ringreduce needs MPI_THREAD_SERIALIZED: its MPI calls run on a progress thread");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &gWorld.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &gWorld.size);
  int* tagUb = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tagUb, &found);
  gWorld.tagUpperBound = found && tagUb != nullptr ? *tagUb : 32767;
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  gWorld.library = FirstLine(version);
  gInitialized = true;
  return gWorld;
}

void FinalizeMpi() {
  std::lock_guard<std::mutex> lock(gMutex);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!gInitialized || finalized) return;
  MPI_Finalize();
  gInitialized = false;
}

const char* MpiState() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return "finalized";
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized ? "initialized" : "uninitialized";
}

void AbortMpi(const std::string& message, int code) {
  std::fprintf(stderr, "ringreduce: %s\n", message.c_str());
  std::fflush(stderr);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

std::string MpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, length);
}

}  // namespace ringreduce
