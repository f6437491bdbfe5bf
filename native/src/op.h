// One MPI operation as the progress thread sees it: plain data, no Node-API. The JS side keeps
// the promise and the reference that pins the buffer, keyed by `id` (see comm.cc).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ringreduce {

using Clock = std::chrono::steady_clock;

enum class OpKind {
  kSend,
  kRecv,
  kControlSend,
  kAllreduce,
  kAllgatherv,
  kBcast,
  kReduceScatter,
  kAlltoallv,
  kReduce,
  kGatherv,
  kScatterv,
  kClose
};

// Why an op failed. native_binding.ts lists the same codes; mpi_errors.ts maps them to errors.
enum class Failure { kNone, kTimeout, kTruncated, kShort, kMpi, kClosed, kTooLarge };

const char* FailureCode(Failure failure);

struct Op {
  uint64_t id = 0;
  OpKind kind = OpKind::kSend;
  int peer = -1;  // send, recv, control: the other rank; bcast, reduce, gatherv, scatterv: the root
  bool root = false;  // reduce, gatherv, scatterv: this rank is the root
  int tag = 0;
  // The buffer: in place (allreduce, allgatherv, bcast, reduce), or the send side (reduce-scatter,
  // alltoallv, gatherv, scatterv; null where this rank sends nothing).
  void* data = nullptr;
  size_t count = 0;  // elements of `type` (bytes for point-to-point)
  // allreduce of several buffers in one hand-off (allreduceEach): every buffer after the first
  // (`data`, `count`), each reduced in its own memory, in this order.
  std::vector<std::pair<void*, size_t>> more;
  // The receive side of the collectives that have one (null where this rank receives nothing),
  // or MPI_IN_PLACE (the scatterv root whose output already is its block of the input).
  void* recv = nullptr;
  size_t recvCount = 0;  // elements
  MPI_Datatype type = MPI_BYTE;
  MPI_Op reduce = MPI_OP_NULL;
  int dtype = -1;        // the wire code of the dtype (collectives)
  bool average = false;  // allreduce, reduce-scatter, reduce: sum, then divide by the number of ranks
  // In elements: allgatherv, gatherv and scatterv the blocks of the buffer laid out by rank;
  // alltoallv the send side.
  std::vector<int> counts;
  std::vector<int> displs;
  std::vector<int> recvCounts;  // alltoallv: the receive side
  std::vector<int> recvDispls;
  std::vector<size_t> blockCounts;  // reduce-scatter: counts[r], any size (split into calls of int counts)
  Clock::time_point deadline;
  MPI_Request request = MPI_REQUEST_NULL;
  // Set once the promise was settled while MPI still owned the buffer (a send past its deadline).
  bool settled = false;
  Failure failure = Failure::kNone;
  std::string message;
};

// What the progress thread hands back to the JS thread.
struct Event {
  enum class Type { kSettle, kRelease, kControl, kLinkError, kClosed };
  Type type = Type::kSettle;
  uint64_t id = 0;
  int peer = -1;
  Failure failure = Failure::kNone;
  bool release = true;  // kSettle: MPI is done with the buffer too
  std::string message;
  std::vector<uint8_t> payload;  // kControl
};

}  // namespace ringreduce
