// One MPI operation as the progress thread sees it: plain data, no Node-API. The JS side keeps
// the promise and the reference that pins the buffer, keyed by `id` (see comm.cc).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ringreduce {

using Clock = std::chrono::steady_clock;

enum class OpKind { kSend, kRecv, kControlSend, kAllreduce, kAllgatherv, kBcast, kClose };

// Why an op failed. native_binding.ts lists the same codes; mpi_errors.ts maps them to errors.
enum class Failure { kNone, kTimeout, kTruncated, kShort, kMpi, kClosed, kTooLarge };

const char* FailureCode(Failure failure);

struct Op {
  uint64_t id = 0;
  OpKind kind = OpKind::kSend;
  int peer = -1;  // send, recv, control: the other rank; bcast: the root
  int tag = 0;
  void* data = nullptr;
  size_t count = 0;  // elements of `type` (bytes for point-to-point)
  MPI_Datatype type = MPI_BYTE;
  MPI_Op reduce = MPI_OP_NULL;
  int dtype = -1;        // the wire code of the dtype (collectives)
  bool average = false;  // allreduce: sum, then divide by the number of ranks
  std::vector<int> counts;  // allgatherv, in elements
  std::vector<int> displs;
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
