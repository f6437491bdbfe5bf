// Comm: the JS object over one ProgressEngine. Its methods start MPI operations and return
// promises; the engine's events come back on the JS thread through a thread-safe function,
// which settles the promises and calls the onControl / onLinkError callbacks.
#pragma once

#include <napi.h>

#include <memory>
#include <optional>
#include <unordered_map>

#include "progress_engine.h"

namespace ringreduce {

class Comm : public Napi::ObjectWrap<Comm> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit Comm(const Napi::CallbackInfo& info);
  ~Comm() override;

 private:
  Napi::Value Send(const Napi::CallbackInfo& info);
  Napi::Value Recv(const Napi::CallbackInfo& info);
  Napi::Value SendControl(const Napi::CallbackInfo& info);
  Napi::Value Allreduce(const Napi::CallbackInfo& info);
  Napi::Value AllreduceEach(const Napi::CallbackInfo& info);
  Napi::Value Allgatherv(const Napi::CallbackInfo& info);
  Napi::Value Bcast(const Napi::CallbackInfo& info);
  Napi::Value ReduceScatter(const Napi::CallbackInfo& info);
  Napi::Value Alltoallv(const Napi::CallbackInfo& info);
  Napi::Value Reduce(const Napi::CallbackInfo& info);
  Napi::Value Gatherv(const Napi::CallbackInfo& info);
  Napi::Value Scatterv(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  std::unique_ptr<Op> PointToPoint(const Napi::CallbackInfo& info, OpKind kind);
  std::unique_ptr<Op> Collective(const Napi::CallbackInfo& info, OpKind kind);
  Napi::Value Submit(Napi::Env env, std::unique_ptr<Op> op, Napi::Value keep);
  void OnEvents(Napi::Env env);
  void Finish(Napi::Env env, const Event& closed);
  void UpdateRef(Napi::Env env);
  void Teardown();
  static void OnEnvCleanup(void* self);

  struct Pending {
    Napi::Promise::Deferred deferred;
    Napi::Reference<Napi::Value> keep;  // pins the buffer while MPI may touch it
    bool settled = false;
  };

  int rank_ = 0;
  int size_ = 0;
  Clock::duration ioTimeout_{};
  Communicators comms_;
  std::unique_ptr<ProgressEngine> engine_;
  Napi::ThreadSafeFunction tsfn_;
  bool referenced_ = false;
  Napi::FunctionReference onControl_;
  Napi::FunctionReference onLinkError_;
  std::unordered_map<uint64_t, Pending> pending_;
  uint64_t nextId_ = 1;
  bool closing_ = false;
  bool closed_ = false;
  std::optional<Napi::Promise::Deferred> closeDeferred_;
  napi_env env_ = nullptr;
  bool cleanupHook_ = false;
};

}  // namespace ringreduce
