// The ringreduce MPI addon: a thin layer over the MPI C API for src/transport/mpi/. Its whole
// surface is described by src/transport/mpi/native_binding.ts.
#include <napi.h>

#include <stdexcept>

#include "comm.h"
#include "mpi_library.h"
#include "types.h"

namespace ringreduce {
namespace {

// init(): { rank, size, threadLevel, tagUpperBound, library, libraryPath }
Napi::Value Init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  try {
    const MpiWorld& world = InitMpi();
    Napi::Object result = Napi::Object::New(env);
    result.Set("rank", world.rank);
    result.Set("size", world.size);
    result.Set("threadLevel", world.threadLevel);
    result.Set("tagUpperBound", world.tagUpperBound);
    result.Set("library", world.library);
    result.Set("libraryPath", world.libraryPath);
    return result;
  } catch (const std::runtime_error& error) {
    throw Napi::Error::New(env, error.what());
  }
}

Napi::Value Finalize(const Napi::CallbackInfo& info) {
  FinalizeMpi();
  return info.Env().Undefined();
}

Napi::Value State(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), MpiState()); }

// abort(message, code): prints the message and ends the whole MPI job. Does not return.
Napi::Value Abort(const Napi::CallbackInfo& info) {
  const std::string message = info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "aborted";
  const int code = info[1].IsNumber() ? info[1].As<Napi::Number>().Int32Value() : 1;
  AbortMpi(message, code);
}

Napi::Object Register(Napi::Env env, Napi::Object exports) {
  exports.Set("init", Napi::Function::New<Init>(env, "init"));
  exports.Set("finalize", Napi::Function::New<Finalize>(env, "finalize"));
  exports.Set("state", Napi::Function::New<State>(env, "state"));
  exports.Set("abort", Napi::Function::New<Abort>(env, "abort"));
  exports.Set("Comm", Comm::Define(env));
  // The code tables, so the loader can check that the TypeScript side numbers them the same.
  Napi::Array dtypes = Napi::Array::New(env);
  for (uint32_t i = 0; i < kDTypeCount; i++) dtypes.Set(i, DTypeName(static_cast<int>(i)));
  exports.Set("dtypes", dtypes);
  Napi::Array reduceOps = Napi::Array::New(env);
  for (uint32_t i = 0; i < kReduceCount; i++) reduceOps.Set(i, ReduceName(static_cast<int>(i)));
  exports.Set("reduceOps", reduceOps);
  return exports;
}

}  // namespace
}  // namespace ringreduce

static Napi::Object RegisterModule(Napi::Env env, Napi::Object exports) { return ringreduce::Register(env, exports); }

NODE_API_MODULE(ringreduce_mpi, RegisterModule)
