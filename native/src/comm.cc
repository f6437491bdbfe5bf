#include "comm.h"

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "mpi_library.h"
#include "types.h"

namespace ringreduce {

namespace {

// How long the env-teardown path (a worker stopped without close) waits for the other ranks.
constexpr auto kTeardownDeadline = std::chrono::milliseconds(2000);

struct View {
  void* data = nullptr;
  size_t bytes = 0;
  napi_typedarray_type type = napi_uint8_array;
};

// The memory of a typed array, SharedArrayBuffer-backed or not (Napi::ArrayBuffer refuses
// SharedArrayBuffers, the raw call does not).
View ViewOf(Napi::Env env, Napi::Value value, const char* what) {
  if (!value.IsTypedArray()) throw Napi::TypeError::New(env, std::string(what) + " must be a typed array");
  View view;
  size_t length = 0;
  napi_value buffer;
  size_t offset = 0;
  NAPI_THROW_IF_FAILED(env, napi_get_typedarray_info(env, value, &view.type, &length, &view.data, &buffer, &offset),
                       View());
  view.bytes = length * Napi::TypedArray(env, value).ElementSize();
  return view;
}

int DTypeOfArray(napi_typedarray_type type) {
  switch (type) {
    case napi_float32_array: return kFloat32;
    case napi_float64_array: return kFloat64;
    case napi_int8_array: return kInt8;
    case napi_int16_array: return kInt16;
    case napi_int32_array: return kInt32;
    case napi_uint8_array: return kUint8;
    case napi_uint16_array: return kUint16;
    case napi_uint32_array: return kUint32;
    case napi_bigint64_array: return kInt64;
    case napi_biguint64_array: return kUint64;
    default: return -1;
  }
}

int IntArg(const Napi::CallbackInfo& info, size_t index, const char* what, int min, int max) {
  const Napi::Value value = info[index];
  if (!value.IsNumber()) throw Napi::TypeError::New(info.Env(), std::string(what) + " must be a number");
  const double number = value.As<Napi::Number>().DoubleValue();
  if (!(number >= min && number <= max) || number != static_cast<double>(static_cast<int64_t>(number))) {
    throw Napi::RangeError::New(info.Env(), std::string(what) + " must be an integer in [" + std::to_string(min) +
                                                ", " + std::to_string(max) + "], got " + std::to_string(number));
  }
  return static_cast<int>(number);
}

// A typed array argument of the collective's dtype.
View BufferArg(Napi::Env env, Napi::Value value, const char* what, int dtype) {
  const View view = ViewOf(env, value, what);
  if (DTypeOfArray(view.type) != dtype) throw Napi::TypeError::New(env, std::string(what) + " is not a typed array of that dtype");
  return view;
}

size_t ElementsOf(const View& view, int dtype) { return view.bytes / BytesPerElement(dtype); }

bool Overlap(const View& a, const View& b) {
  if (a.bytes == 0 || b.bytes == 0) return false;
  const auto* x = static_cast<const char*>(a.data);
  const auto* y = static_cast<const char*>(b.data);
  return x < y + b.bytes && y < x + a.bytes;
}

// A reduce-op code MPI can apply to `dtype`: 'average' needs a float dtype (MPI_SUM, then a
// division), band/bor/bxor an integer one (MPI forbids them on floats).
int ReduceArg(const Napi::CallbackInfo& info, size_t index, int dtype) {
  const int reduce = IntArg(info, index, "reduceOp", 0, kReduceCount - 1);
  if (reduce == kAverage && !IsFloatDType(dtype)) {
    throw Napi::TypeError::New(info.Env(), "average needs a float dtype");
  }
  if (IsBitwise(reduce) && IsFloatDType(dtype)) {
    throw Napi::TypeError::New(info.Env(), std::string(ReduceName(reduce)) + " needs an integer dtype, not " +
                                               DTypeName(dtype));
  }
  return reduce;
}

// One count per rank, non-negative integers adding up to at most `maxTotal` elements.
std::vector<int64_t> ParseCounts(const Napi::CallbackInfo& info, size_t index, const char* what, int size,
                                 int64_t maxTotal, const char* why) {
  Napi::Env env = info.Env();
  if (!info[index].IsArray() || info[index].As<Napi::Array>().Length() != static_cast<uint32_t>(size)) {
    throw Napi::TypeError::New(env, std::string(what) + " must be an array with one count per rank");
  }
  Napi::Array array = info[index].As<Napi::Array>();
  std::vector<int64_t> counts;
  int64_t total = 0;
  for (int r = 0; r < size; r++) {
    const Napi::Value count = array.Get(static_cast<uint32_t>(r));
    const double value = count.IsNumber() ? count.As<Napi::Number>().DoubleValue() : -1;
    if (!(value >= 0) || value != std::floor(value)) {
      throw Napi::TypeError::New(env, std::string(what) + " must be non-negative integers");
    }
    if (value > static_cast<double>(maxTotal - total)) {
      throw Napi::RangeError::New(env, std::string(what) + " add up to more than " + why);
    }
    counts.push_back(static_cast<int64_t>(value));
    total += counts.back();
  }
  return counts;
}

// Counts as MPI takes them, C ints: fills `counts` and (if given) `displs`, the running sums,
// and returns the total, which must be at most INT_MAX elements (then every count and
// displacement is too).
int64_t CountsArg(const Napi::CallbackInfo& info, size_t index, const char* what, int size, std::vector<int>* counts,
                  std::vector<int>* displs) {
  const std::vector<int64_t> parsed =
      ParseCounts(info, index, what, size, INT_MAX, "2^31-1 elements, which MPI's int counts and displacements cannot express");
  int64_t total = 0;
  counts->clear();
  if (displs != nullptr) displs->clear();
  for (const int64_t count : parsed) {
    counts->push_back(static_cast<int>(count));
    if (displs != nullptr) displs->push_back(static_cast<int>(total));
    total += count;
  }
  return total;
}

Napi::Array Keep(Napi::Env env, std::initializer_list<Napi::Value> values) {
  Napi::Array keep = Napi::Array::New(env);
  uint32_t i = 0;
  for (const Napi::Value& value : values) keep.Set(i++, value);
  return keep;
}

MPI_Comm Dup(Napi::Env env) {
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) throw Napi::Error::New(env, "MPI_Comm_dup failed: " + MpiErrorString(rc));
  // Errors come back as codes, so a failed operation rejects its promise instead of aborting.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return comm;
}

}  // namespace

Napi::Function Comm::Define(Napi::Env env) {
  return DefineClass(env, "Comm",
                     {
                         InstanceMethod<&Comm::Send>("send"),
                         InstanceMethod<&Comm::Recv>("recv"),
                         InstanceMethod<&Comm::SendControl>("sendControl"),
                         InstanceMethod<&Comm::Allreduce>("allreduce"),
                         InstanceMethod<&Comm::AllreduceEach>("allreduceEach"),
                         InstanceMethod<&Comm::Allgatherv>("allgatherv"),
                         InstanceMethod<&Comm::Bcast>("bcast"),
                         InstanceMethod<&Comm::ReduceScatter>("reduceScatter"),
                         InstanceMethod<&Comm::Alltoallv>("alltoallv"),
                         InstanceMethod<&Comm::Reduce>("reduce"),
                         InstanceMethod<&Comm::Gatherv>("gatherv"),
                         InstanceMethod<&Comm::Scatterv>("scatterv"),
                         InstanceMethod<&Comm::Close>("close"),
                     });
}

// new Comm({ ioTimeoutMs, onControl(peer, payload), onLinkError(peer, message) })
Comm::Comm(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Comm>(info) {
  Napi::Env env = info.Env();
  if (std::strcmp(MpiState(), "initialized") != 0) {
    throw Napi::Error::New(env, "MPI is not initialised: call init() before creating a Comm");
  }
  if (!info[0].IsObject()) throw Napi::TypeError::New(env, "Comm options must be an object");
  Napi::Object options = info[0].As<Napi::Object>();
  const Napi::Value timeout = options.Get("ioTimeoutMs");
  if (!timeout.IsNumber() || !(timeout.As<Napi::Number>().DoubleValue() > 0)) {
    throw Napi::TypeError::New(env, "ioTimeoutMs must be a positive number");
  }
  if (!options.Get("onControl").IsFunction() || !options.Get("onLinkError").IsFunction()) {
    throw Napi::TypeError::New(env, "onControl and onLinkError must be functions");
  }
  ioTimeout_ = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(timeout.As<Napi::Number>().DoubleValue()));
  onControl_ = Napi::Persistent(options.Get("onControl").As<Napi::Function>());
  onLinkError_ = Napi::Persistent(options.Get("onLinkError").As<Napi::Function>());
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  comms_.data = Dup(env);
  comms_.control = Dup(env);
  comms_.collective = Dup(env);
  CreateOps();

  tsfn_ = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo&) {}),
                                        "ringreduce-mpi-progress", 0, 1);
  tsfn_.Unref(env);
  // Registered after the thread-safe function, so it runs before Node closes it.
  env_ = env;
  cleanupHook_ = napi_add_env_cleanup_hook(env, &Comm::OnEnvCleanup, this) == napi_ok;
  auto doorbell = Doorbell::Create(comms_.control);
  engine_ = std::make_unique<ProgressEngine>(comms_, size_, ioTimeout_, std::move(doorbell), [this] {
    tsfn_.NonBlockingCall([this](Napi::Env env, Napi::Function) { OnEvents(env); });
  });
}

Comm::~Comm() {
  if (cleanupHook_) napi_remove_env_cleanup_hook(env_, &Comm::OnEnvCleanup, this);
  Teardown();
}

void Comm::OnEnvCleanup(void* self) {
  auto* comm = static_cast<Comm*>(self);
  comm->cleanupHook_ = false;
  comm->Teardown();
}

// The worker is going away without close(): close with a short deadline, synchronously, and
// finalise MPI if every rank got there; a thread stuck in a blocking collective ends the job.
void Comm::Teardown() {
  if (!engine_ || closed_) return;
  closed_ = true;
  auto op = std::make_unique<Op>();
  op->kind = OpKind::kClose;
  op->id = nextId_++;
  op->deadline = Clock::now() + kTeardownDeadline;
  engine_->Submit(std::move(op));
  if (!engine_->Join(kTeardownDeadline + std::chrono::milliseconds(1000))) {
    AbortMpi("rank " + std::to_string(rank_) +
                 ": the engine stopped while an MPI collective was still running; ending the MPI job",
             1);
  }
  bool clean = false;
  std::string reason = "the progress thread did not report";
  for (const Event& event : engine_->TakeEvents()) {
    if (event.type != Event::Type::kClosed) continue;
    clean = event.failure == Failure::kNone;
    reason = event.message;
  }
  engine_.reset();
  if (clean) {
    FinalizeMpi();
  } else {
    std::fprintf(stderr,
                 "ringreduce: rank %d: the engine stopped without shutdown() and MPI was not finalised (%s); the MPI "
                 "launcher will end the job\n",
                 rank_, reason.c_str());
  }
}

std::unique_ptr<Op> Comm::PointToPoint(const Napi::CallbackInfo& info, OpKind kind) {
  Napi::Env env = info.Env();
  auto op = std::make_unique<Op>();
  op->kind = kind;
  op->peer = IntArg(info, 0, "peer", 0, size_ - 1);
  if (op->peer == rank_) throw Napi::RangeError::New(env, "peer must be another rank");
  const size_t bufferIndex = kind == OpKind::kControlSend ? 1 : 2;
  if (kind != OpKind::kControlSend) op->tag = IntArg(info, 1, "tag", 0, INT_MAX);
  const View view = ViewOf(env, info[bufferIndex], "data");
  if (view.bytes > static_cast<size_t>(INT_MAX)) {
    throw Napi::RangeError::New(env, "a point-to-point message is limited to 2^31-1 bytes");
  }
  op->data = view.data;
  op->count = view.bytes;
  op->deadline = Clock::now() + ioTimeout_;
  return op;
}

Napi::Value Comm::Send(const Napi::CallbackInfo& info) {
  auto op = PointToPoint(info, OpKind::kSend);
  return Submit(info.Env(), std::move(op), info[2]);
}

Napi::Value Comm::Recv(const Napi::CallbackInfo& info) {
  auto op = PointToPoint(info, OpKind::kRecv);
  return Submit(info.Env(), std::move(op), info[2]);
}

Napi::Value Comm::SendControl(const Napi::CallbackInfo& info) {
  auto op = PointToPoint(info, OpKind::kControlSend);
  return Submit(info.Env(), std::move(op), info[1]);
}

// (buf, dtype, ...): the typed array must be of the dtype's class.
std::unique_ptr<Op> Comm::Collective(const Napi::CallbackInfo& info, OpKind kind) {
  Napi::Env env = info.Env();
  const View view = ViewOf(env, info[0], "buf");
  auto op = std::make_unique<Op>();
  op->kind = kind;
  op->dtype = IntArg(info, 1, "dtype", 0, kDTypeCount - 1);
  if (DTypeOfArray(view.type) != op->dtype) throw Napi::TypeError::New(env, "buf is not a typed array of that dtype");
  op->type = DatatypeOf(op->dtype);
  op->data = view.data;
  op->count = view.bytes / BytesPerElement(op->dtype);
  return op;
}

Napi::Value Comm::Allreduce(const Napi::CallbackInfo& info) {
  auto op = Collective(info, OpKind::kAllreduce);
  const int reduce = ReduceArg(info, 2, op->dtype);
  op->reduce = MpiOpOf(reduce, op->dtype);
  op->average = reduce == kAverage;
  return Submit(info.Env(), std::move(op), info[0]);
}

// (bufs, dtype, reduceOp): one or more typed arrays of the dtype's class, each reduced in place,
// in order, in one hand-off to the progress thread (instead of packing them into one buffer).
Napi::Value Comm::AllreduceEach(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsArray() || info[0].As<Napi::Array>().Length() == 0) {
    throw Napi::TypeError::New(env, "bufs must be a non-empty array of typed arrays");
  }
  const Napi::Array bufs = info[0].As<Napi::Array>();
  auto op = std::make_unique<Op>();
  op->kind = OpKind::kAllreduce;
  op->dtype = IntArg(info, 1, "dtype", 0, kDTypeCount - 1);
  op->type = DatatypeOf(op->dtype);
  const int reduce = ReduceArg(info, 2, op->dtype);
  op->reduce = MpiOpOf(reduce, op->dtype);
  op->average = reduce == kAverage;
  // The buffers are pinned through a copy of the array: the caller's array may change.
  Napi::Array keep = Napi::Array::New(env, bufs.Length());
  for (uint32_t i = 0; i < bufs.Length(); i++) {
    const Napi::Value buf = bufs.Get(i);
    const View view = ViewOf(env, buf, "bufs[i]");
    if (DTypeOfArray(view.type) != op->dtype) throw Napi::TypeError::New(env, "bufs[i] is not a typed array of that dtype");
    const size_t count = view.bytes / BytesPerElement(op->dtype);
    if (i == 0) {
      op->data = view.data;
      op->count = count;
    } else {
      op->more.emplace_back(view.data, count);
    }
    keep.Set(i, buf);
  }
  return Submit(env, std::move(op), keep);
}

Napi::Value Comm::Bcast(const Napi::CallbackInfo& info) {
  auto op = Collective(info, OpKind::kBcast);
  op->peer = IntArg(info, 2, "root", 0, size_ - 1);
  return Submit(info.Env(), std::move(op), info[0]);
}

// (buf, dtype, counts): counts[r] elements of rank r at consecutive offsets; ours is in place.
Napi::Value Comm::Allgatherv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto op = Collective(info, OpKind::kAllgatherv);
  const int64_t total = CountsArg(info, 2, "counts", size_, &op->counts, &op->displs);
  if (static_cast<size_t>(total) != op->count) {
    throw Napi::RangeError::New(env, "buf must hold exactly the sum of counts");
  }
  return Submit(env, std::move(op), info[0]);
}

// (input, output, dtype, counts, reduceOp): MPI_Reduce_scatter. `input` holds counts[r] elements
// for each rank r in rank order; `output` (counts[rank]) gets this rank's block reduced. The
// progress thread splits it into calls MPI's int counts hold, so counts have no int limit.
Napi::Value Comm::ReduceScatter(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto op = std::make_unique<Op>();
  op->kind = OpKind::kReduceScatter;
  op->dtype = IntArg(info, 2, "dtype", 0, kDTypeCount - 1);
  const View input = BufferArg(env, info[0], "input", op->dtype);
  const View output = BufferArg(env, info[1], "output", op->dtype);
  constexpr int64_t kMaxSafeInteger = (int64_t{1} << 53) - 1;
  const std::vector<int64_t> counts = ParseCounts(info, 3, "counts", size_, kMaxSafeInteger, "2^53-1 elements");
  const int reduce = ReduceArg(info, 4, op->dtype);
  int64_t total = 0;
  for (const int64_t count : counts) {
    op->blockCounts.push_back(static_cast<size_t>(count));
    total += count;
  }
  if (ElementsOf(input, op->dtype) != static_cast<size_t>(total)) {
    throw Napi::RangeError::New(env, "input must hold exactly the sum of counts");
  }
  if (ElementsOf(output, op->dtype) != op->blockCounts[rank_]) {
    throw Napi::RangeError::New(env, "output must hold exactly counts[rank] elements");
  }
  if (Overlap(input, output)) throw Napi::RangeError::New(env, "input and output must not overlap");
  op->type = DatatypeOf(op->dtype);
  op->reduce = MpiOpOf(reduce, op->dtype);
  op->average = reduce == kAverage;
  op->data = input.data;
  op->count = static_cast<size_t>(total);
  op->recv = output.data;
  op->recvCount = op->blockCounts[rank_];
  return Submit(env, std::move(op), Keep(env, {info[0], info[1]}));
}

// (input, output, dtype, sendCounts, recvCounts): MPI_Alltoallv. `input` holds sendCounts[j]
// elements for rank j, `output` gets recvCounts[j] from rank j, both in rank order.
Napi::Value Comm::Alltoallv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto op = std::make_unique<Op>();
  op->kind = OpKind::kAlltoallv;
  op->dtype = IntArg(info, 2, "dtype", 0, kDTypeCount - 1);
  const View input = BufferArg(env, info[0], "input", op->dtype);
  const View output = BufferArg(env, info[1], "output", op->dtype);
  const int64_t sent = CountsArg(info, 3, "sendCounts", size_, &op->counts, &op->displs);
  const int64_t received = CountsArg(info, 4, "recvCounts", size_, &op->recvCounts, &op->recvDispls);
  if (ElementsOf(input, op->dtype) != static_cast<size_t>(sent)) {
    throw Napi::RangeError::New(env, "input must hold exactly the sum of sendCounts");
  }
  if (ElementsOf(output, op->dtype) != static_cast<size_t>(received)) {
    throw Napi::RangeError::New(env, "output must hold exactly the sum of recvCounts");
  }
  if (Overlap(input, output)) throw Napi::RangeError::New(env, "input and output must not overlap");
  op->type = DatatypeOf(op->dtype);
  op->data = input.data;
  op->count = static_cast<size_t>(sent);
  op->recv = output.data;
  op->recvCount = static_cast<size_t>(received);
  return Submit(env, std::move(op), Keep(env, {info[0], info[1]}));
}

// (buf, dtype, reduceOp, root): MPI_Reduce, MPI_IN_PLACE at the root; other ranks' buf is only read.
Napi::Value Comm::Reduce(const Napi::CallbackInfo& info) {
  auto op = Collective(info, OpKind::kReduce);
  const int reduce = ReduceArg(info, 2, op->dtype);
  op->peer = IntArg(info, 3, "root", 0, size_ - 1);
  op->root = op->peer == rank_;
  op->reduce = MpiOpOf(reduce, op->dtype);
  op->average = reduce == kAverage;
  return Submit(info.Env(), std::move(op), info[0]);
}

// (input, out, dtype, counts, root): MPI_Gatherv. The root's `out` (the sum of counts) gets
// every block, its own already in place (MPI_IN_PLACE; its `input` is not used); every other
// rank sends `input` (counts[rank]) and may pass undefined as `out`.
Napi::Value Comm::Gatherv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto op = std::make_unique<Op>();
  op->kind = OpKind::kGatherv;
  op->dtype = IntArg(info, 2, "dtype", 0, kDTypeCount - 1);
  const int64_t total = CountsArg(info, 3, "counts", size_, &op->counts, &op->displs);
  op->peer = IntArg(info, 4, "root", 0, size_ - 1);
  op->root = op->peer == rank_;
  op->type = DatatypeOf(op->dtype);
  if (op->root) {
    const View out = BufferArg(env, info[1], "out", op->dtype);
    if (ElementsOf(out, op->dtype) != static_cast<size_t>(total)) {
      throw Napi::RangeError::New(env, "the root's out must hold exactly the sum of counts");
    }
    op->recv = out.data;
    op->recvCount = static_cast<size_t>(total);
    return Submit(env, std::move(op), info[1]);
  }
  const View input = BufferArg(env, info[0], "input", op->dtype);
  if (ElementsOf(input, op->dtype) != static_cast<size_t>(op->counts[rank_])) {
    throw Napi::RangeError::New(env, "input must hold exactly counts[rank] elements");
  }
  op->data = input.data;
  op->count = static_cast<size_t>(op->counts[rank_]);
  return Submit(env, std::move(op), info[0]);
}

// (input, output, dtype, counts, root): MPI_Scatterv. The root's `input` (the sum of counts)
// holds every block; every rank's `output` (counts[rank]) gets its own. Other ranks may pass
// undefined as `input`. A root whose output already is its block of the input uses MPI_IN_PLACE.
Napi::Value Comm::Scatterv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto op = std::make_unique<Op>();
  op->kind = OpKind::kScatterv;
  op->dtype = IntArg(info, 2, "dtype", 0, kDTypeCount - 1);
  const int64_t total = CountsArg(info, 3, "counts", size_, &op->counts, &op->displs);
  op->peer = IntArg(info, 4, "root", 0, size_ - 1);
  op->root = op->peer == rank_;
  op->type = DatatypeOf(op->dtype);
  const View output = BufferArg(env, info[1], "output", op->dtype);
  if (ElementsOf(output, op->dtype) != static_cast<size_t>(op->counts[rank_])) {
    throw Napi::RangeError::New(env, "output must hold exactly counts[rank] elements");
  }
  op->recv = output.data;
  op->recvCount = static_cast<size_t>(op->counts[rank_]);
  if (!op->root) return Submit(env, std::move(op), info[1]);
  const View input = BufferArg(env, info[0], "input", op->dtype);
  if (ElementsOf(input, op->dtype) != static_cast<size_t>(total)) {
    throw Napi::RangeError::New(env, "the root's input must hold exactly the sum of counts");
  }
  const size_t elementSize = BytesPerElement(op->dtype);
  const char* own = static_cast<const char*>(input.data) + static_cast<size_t>(op->displs[rank_]) * elementSize;
  if (output.bytes > 0 && output.data == own) {
    op->recv = MPI_IN_PLACE;
  } else if (Overlap(input, output)) {
    throw Napi::RangeError::New(env, "the root's output must be its own block of the input, or not overlap it");
  }
  op->data = input.data;
  op->count = static_cast<size_t>(total);
  return Submit(env, std::move(op), Keep(env, {info[0], info[1]}));
}

Napi::Value Comm::Submit(Napi::Env env, std::unique_ptr<Op> op, Napi::Value keep) {
  auto deferred = Napi::Promise::Deferred::New(env);
  if (closing_) {
    Napi::Error error = Napi::Error::New(env, "the MPI transport was closed");
    error.Set("code", FailureCode(Failure::kClosed));
    deferred.Reject(error.Value());
    return deferred.Promise();
  }
  op->id = nextId_++;
  pending_.emplace(op->id, Pending{deferred, Napi::Persistent(keep), false});
  UpdateRef(env);
  engine_->Submit(std::move(op));
  return deferred.Promise();
}

// close(timeoutMs): Promise<{ clean: boolean, reason: string }>
Napi::Value Comm::Close(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int timeoutMs = IntArg(info, 0, "timeoutMs", 0, INT_MAX);
  if (closing_) throw Napi::Error::New(env, "close() was already called");
  closing_ = true;
  closeDeferred_.emplace(Napi::Promise::Deferred::New(env));
  auto op = std::make_unique<Op>();
  op->kind = OpKind::kClose;
  op->id = nextId_++;
  op->deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  UpdateRef(env);
  engine_->Submit(std::move(op));
  return closeDeferred_->Promise();
}

void Comm::OnEvents(Napi::Env env) {
  if (!engine_) return;
  Napi::HandleScope scope(env);
  std::optional<Napi::Error> thrown;
  for (Event& event : engine_->TakeEvents()) {
    try {
      switch (event.type) {
        case Event::Type::kSettle: {
          auto it = pending_.find(event.id);
          if (it == pending_.end()) break;
          if (event.failure == Failure::kNone) {
            it->second.deferred.Resolve(env.Undefined());
          } else {
            Napi::Error error = Napi::Error::New(env, event.message.empty() ? FailureCode(event.failure) : event.message);
            error.Set("code", FailureCode(event.failure));
            it->second.deferred.Reject(error.Value());
          }
          it->second.settled = true;
          if (event.release) pending_.erase(it);
          break;
        }
        case Event::Type::kRelease:
          pending_.erase(event.id);
          break;
        case Event::Type::kControl: {
          auto buffer = Napi::ArrayBuffer::New(env, event.payload.size());
          if (!event.payload.empty()) std::memcpy(buffer.Data(), event.payload.data(), event.payload.size());
          onControl_.Call({Napi::Number::New(env, event.peer), Napi::Uint8Array::New(env, event.payload.size(), buffer, 0)});
          break;
        }
        case Event::Type::kLinkError:
          onLinkError_.Call({Napi::Number::New(env, event.peer), Napi::String::New(env, event.message)});
          break;
        case Event::Type::kClosed:
          Finish(env, event);
          break;
      }
    } catch (const Napi::Error& error) {
      if (!thrown) thrown = error;
    }
    if (!engine_) break;
  }
  if (engine_) UpdateRef(env);
  if (thrown) throw *thrown;
}

// The progress thread has emitted its last event and is exiting: join it, free what MPI
// allows, and tell the caller whether MPI_Finalize is safe.
void Comm::Finish(Napi::Env env, const Event& closed) {
  const bool joined = engine_->Join(std::chrono::milliseconds(1000));
  bool clean = joined && closed.failure == Failure::kNone;
  std::string reason = joined ? closed.message : "the MPI progress thread did not stop";
  for (auto& [id, pending] : pending_) {
    if (pending.settled) continue;
    Napi::Error error = Napi::Error::New(env, "the MPI transport was closed");
    error.Set("code", FailureCode(Failure::kClosed));
    pending.deferred.Reject(error.Value());
    pending.settled = true;
  }
  // What is left in pending_ are buffers MPI never gave back: they stay pinned, as MPI may
  // still write to them.
  if (joined) {
    engine_.reset();
    if (clean) {
      MPI_Comm_free(&comms_.data);
      MPI_Comm_free(&comms_.control);
      MPI_Comm_free(&comms_.collective);
    }
  }
  closed_ = true;
  if (referenced_) tsfn_.Unref(env);
  referenced_ = false;
  tsfn_.Release();
  Napi::Object result = Napi::Object::New(env);
  result.Set("clean", Napi::Boolean::New(env, clean));
  result.Set("reason", Napi::String::New(env, reason));
  closeDeferred_->Resolve(result);
}

// The thread-safe function keeps the event loop alive only while a promise is pending.
void Comm::UpdateRef(Napi::Env env) {
  if (closed_) return;
  const bool want = !pending_.empty() || (closing_ && !closed_);
  if (want == referenced_) return;
  referenced_ = want;
  if (want) tsfn_.Ref(env);
  else tsfn_.Unref(env);
}

}  // namespace ringreduce
