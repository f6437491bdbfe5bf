#include "progress_engine.h"

#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "mpi_library.h"
#include "types.h"

namespace ringreduce {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr int kControlTag = 0;
// Right after activity the thread polls for this long before it starts to sleep: the next op
// of a burst usually arrives within a thread wake-up (20-50 us).
constexpr auto kSpinWindow = microseconds(60);
constexpr auto kMinSleep = microseconds(20);
// The longest idle sleep when every peer can ring the doorbell, when some peer must be polled
// for, and while closing (the closing barrier's messages ring nothing).
constexpr auto kMaxSleepRung = milliseconds(1000);
constexpr auto kMaxSleepPolled = milliseconds(10);
constexpr auto kMaxSleepClosing = milliseconds(1);
// Collectives run in chunks MPI's int counts can express.
constexpr size_t kMaxChunk = size_t{1} << 30;
// An allreduce runs as MPI_Allreduce calls of at most this many bytes (a reduce and a
// reduce-scatter too, see ReduceScatter). Open MPI's allreduce mallocs a temporary as large as
// the message; from 32 MiB up glibc serves it with a fresh mmap on every call, whose page
// faults made 32 MiB take ~170 ms instead of ~10 ms here (2 ranks, shared memory). Pieces of 2 MiB also stay in cache: 16 MiB took 3.4-6 ms in 2 MiB
// pieces, 6-8 ms in one call. See docs/mpi.md, "Performance".
constexpr size_t kReduceChunkBytes = size_t{2} << 20;

std::string Describe(const char* what, int rc) { return std::string(what) + ": " + MpiErrorString(rc); }

}  // namespace

ProgressEngine::ProgressEngine(Communicators comms, int size, Clock::duration ioTimeout,
                               std::unique_ptr<Doorbell> doorbell, std::function<void()> notify)
    : comms_(comms), size_(size), ioTimeout_(ioTimeout), doorbell_(std::move(doorbell)), notify_(std::move(notify)) {
  thread_ = std::thread([this] { Run(); });
}

ProgressEngine::~ProgressEngine() {
  // Join() normally did this; a thread stuck in MPI must not take the process down with it.
  if (thread_.joinable()) thread_.detach();
}

void ProgressEngine::Submit(std::unique_ptr<Op> op) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (exited_) {
    Event event;
    event.id = op->id;
    event.failure = Failure::kClosed;
    event.message = "the MPI progress thread has stopped";
    events_.push_back(std::move(event));
    if (events_.size() == 1) notify_();
    return;
  }
  incoming_.push_back(std::move(op));
  if (!sleeping_) return;
  if (doorbell_->Usable()) doorbell_->RingSelf();
  else wake_.notify_one();
}

std::vector<Event> ProgressEngine::TakeEvents() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Event> out;
  out.swap(events_);
  return out;
}

bool ProgressEngine::Join(std::chrono::milliseconds timeout) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!exitedCv_.wait_for(lock, timeout, [this] { return exited_; })) return false;
  }
  if (thread_.joinable()) thread_.join();
  return true;
}

void ProgressEngine::Emit(Event event) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(event));
  if (events_.size() == 1) notify_();
}

void ProgressEngine::Settle(Op& op, Failure failure, std::string message, bool release) {
  if (op.settled) {
    if (release) {
      Event event;
      event.type = Event::Type::kRelease;
      event.id = op.id;
      Emit(std::move(event));
    }
    return;
  }
  op.settled = true;
  Event event;
  event.id = op.id;
  event.failure = failure;
  event.message = std::move(message);
  event.release = release;
  Emit(std::move(event));
}

Clock::duration ProgressEngine::IdleSleep(Clock::duration idle) const {
  if (idle < kSpinWindow) return Clock::duration::zero();
  const Clock::duration cap = close_ != nullptr            ? kMaxSleepClosing
                              : doorbell_->CoversAllPeers() ? kMaxSleepRung
                                                            : kMaxSleepPolled;
  return std::clamp<Clock::duration>(idle / 32, kMinSleep, cap);
}

void ProgressEngine::Run() {
  // Sleeps of tens of microseconds need a tight timer slack (the default is 50 us).
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  auto lastActivity = Clock::now();
  std::vector<std::unique_ptr<Op>> fresh;
  for (;;) {
    const bool busy = AwaitingAnything();
    Clock::duration sleep = Clock::duration::zero();
    bool waitOnBell = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (incoming_.empty() && !busy) sleep = IdleSleep(Clock::now() - lastActivity);
      if (sleep > Clock::duration::zero()) {
        sleeping_ = true;
        waitOnBell = doorbell_->Usable();
        if (!waitOnBell) {
          wake_.wait_for(lock, sleep, [this] { return !incoming_.empty(); });
          sleeping_ = false;
        }
      }
      if (!waitOnBell) fresh.swap(incoming_);
    }
    if (waitOnBell) {
      // A submit rings the doorbell once it sees sleeping_, so none is missed. A ring is activity:
      // the message behind it may become visible to MPI a moment later, so poll closely again.
      if (doorbell_->Wait(sleep)) lastActivity = Clock::now();
      std::lock_guard<std::mutex> lock(mutex_);
      sleeping_ = false;
      fresh.swap(incoming_);
    }
    bool progressed = !fresh.empty();
    for (auto& op : fresh) Start(std::move(op));
    fresh.clear();
    progressed |= TestActive();
    progressed |= ProbeControl();
    progressed |= TestControl();
    const auto now = Clock::now();
    Expire(now);
    if (close_ != nullptr && CloseStep(now)) break;
    if (progressed) {
      lastActivity = now;
    } else if (busy || now - lastActivity < kSpinWindow) {
      sched_yield();
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  exited_ = true;
  // Ops that raced with the close: settle them so no promise is left pending.
  for (auto& op : incoming_) {
    Event event;
    event.id = op->id;
    event.failure = Failure::kClosed;
    event.message = "the MPI transport was closed";
    events_.push_back(std::move(event));
  }
  incoming_.clear();
  if (!events_.empty()) notify_();
  exitedCv_.notify_all();
}

// Someone waits for a request to complete: poll. Requests already settled (a send past its
// deadline, ops cut short by close) and the closing barrier are polled at the idle pace.
bool ProgressEngine::AwaitingAnything() const {
  if (!controlRecvs_.empty()) return true;
  return std::any_of(active_.begin(), active_.end(), [](const std::unique_ptr<Op>& op) { return !op->settled; });
}

void ProgressEngine::Start(std::unique_ptr<Op> op) {
  if (op->kind == OpKind::kClose) {
    BeginClose(std::move(op));
    return;
  }
  if (close_ != nullptr) {
    Settle(*op, Failure::kClosed, "the MPI transport was closed", true);
    return;
  }
  int rc = MPI_SUCCESS;
  switch (op->kind) {
    case OpKind::kSend:
      rc = MPI_Isend(op->data, static_cast<int>(op->count), MPI_BYTE, op->peer, op->tag, comms_.data, &op->request);
      break;
    case OpKind::kControlSend:
      rc = MPI_Isend(op->data, static_cast<int>(op->count), MPI_BYTE, op->peer, kControlTag, comms_.control,
                     &op->request);
      if (rc == MPI_SUCCESS) doorbell_->Ring(op->peer);
      break;
    case OpKind::kRecv:
      rc = MPI_Irecv(op->data, static_cast<int>(op->count), MPI_BYTE, op->peer, op->tag, comms_.data, &op->request);
      break;
    default:
      RunCollective(*op);
      return;
  }
  if (rc != MPI_SUCCESS) {
    Settle(*op, Failure::kMpi, Describe("posting the operation failed", rc), true);
    return;
  }
  active_.push_back(std::move(op));
}

void ProgressEngine::RunCollective(Op& op) {
  const size_t elementSize = BytesPerElement(op.dtype);
  auto* bytes = static_cast<char*>(op.data);
  const MPI_Comm comm = comms_.collective;
  int rc = MPI_SUCCESS;
  switch (op.kind) {
    case OpKind::kAllreduce: {
      const size_t chunk = std::max<size_t>(1, kReduceChunkBytes / elementSize);
      const auto reduceInPieces = [&](void* data, size_t count) {
        auto* at = static_cast<char*>(data);
        for (size_t done = 0; done < count && rc == MPI_SUCCESS;) {
          const size_t n = std::min(chunk, count - done);
          rc = MPI_Allreduce(MPI_IN_PLACE, at + done * elementSize, static_cast<int>(n), op.type, op.reduce, comm);
          done += n;
        }
        if (rc == MPI_SUCCESS && op.average) DivideInPlace(op.dtype, data, count, size_);
      };
      reduceInPieces(op.data, op.count);
      for (const auto& [data, count] : op.more) reduceInPieces(data, count);
      break;
    }
    case OpKind::kBcast:
      for (size_t done = 0; done < op.count && rc == MPI_SUCCESS;) {
        const size_t n = std::min(kMaxChunk, op.count - done);
        rc = MPI_Bcast(bytes + done * elementSize, static_cast<int>(n), op.type, op.peer, comm);
        done += n;
      }
      break;
    case OpKind::kAllgatherv:
      rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, op.data, op.counts.data(), op.displs.data(), op.type,
                          comm);
      break;
    case OpKind::kReduceScatter:
      rc = ReduceScatter(op);
      if (rc == MPI_SUCCESS && op.average) DivideInPlace(op.dtype, op.recv, op.recvCount, size_);
      break;
    case OpKind::kAlltoallv:
      rc = MPI_Alltoallv(op.data, op.counts.data(), op.displs.data(), op.type, op.recv, op.recvCounts.data(),
                         op.recvDispls.data(), op.type, comm);
      break;
    case OpKind::kReduce: {
      // In pieces, as the allreduce (and so any length: no int count to overflow).
      const size_t chunk = std::max<size_t>(1, kReduceChunkBytes / elementSize);
      for (size_t done = 0; done < op.count && rc == MPI_SUCCESS;) {
        const size_t n = std::min(chunk, op.count - done);
        char* piece = bytes + done * elementSize;
        rc = op.root ? MPI_Reduce(MPI_IN_PLACE, piece, static_cast<int>(n), op.type, op.reduce, op.peer, comm)
                     : MPI_Reduce(piece, nullptr, static_cast<int>(n), op.type, op.reduce, op.peer, comm);
        done += n;
      }
      if (rc == MPI_SUCCESS && op.average && op.root) DivideInPlace(op.dtype, op.data, op.count, size_);
      break;
    }
    case OpKind::kGatherv:
      // The root's own block is already in place in its receive buffer.
      rc = op.root ? MPI_Gatherv(MPI_IN_PLACE, 0, op.type, op.recv, op.counts.data(), op.displs.data(), op.type,
                                 op.peer, comm)
                   : MPI_Gatherv(op.data, static_cast<int>(op.count), op.type, nullptr, op.counts.data(),
                                 op.displs.data(), op.type, op.peer, comm);
      break;
    case OpKind::kScatterv:
      rc = MPI_Scatterv(op.root ? op.data : nullptr, op.counts.data(), op.displs.data(), op.type, op.recv,
                        static_cast<int>(op.recvCount), op.type, op.peer, comm);
      break;
    default:
      break;
  }
  if (rc != MPI_SUCCESS) Settle(op, Failure::kMpi, Describe("the MPI collective failed", rc), true);
  else Settle(op, Failure::kNone, "", true);
}

// MPI_Reduce_scatter in calls of at most kReduceChunkBytes of input, as the allreduce (Open
// MPI's reduce-scatter also allocates temporaries as large as the message: 64 MiB took ~200 ms
// in one call, ~35 ms in 2 MiB pieces here, 2 ranks). Each call takes the next window of every
// rank's block, packed back to back into scratch_, and lands this rank's window straight in
// the output. Every rank runs the same calls (the counts are the same everywhere); counts of
// any size work, each call's fit in an int.
int ProgressEngine::ReduceScatter(Op& op) {
  const size_t elementSize = BytesPerElement(op.dtype);
  const size_t ranks = op.blockCounts.size();
  std::vector<int> counts(ranks);
  auto* input = static_cast<const char*>(op.data);
  auto* output = static_cast<char*>(op.recv);
  if (op.count * elementSize <= kReduceChunkBytes) {
    for (size_t r = 0; r < ranks; r++) counts[r] = static_cast<int>(op.blockCounts[r]);
    return MPI_Reduce_scatter(op.data, op.recv, counts.data(), op.type, op.reduce, comms_.collective);
  }
  const size_t window = std::max<size_t>(1, kReduceChunkBytes / elementSize / ranks);
  if (scratch_.size() < window * ranks * elementSize) scratch_.resize(window * ranks * elementSize);
  std::vector<size_t> starts(ranks);
  size_t longest = 0;
  for (size_t r = 0, at = 0; r < ranks; at += op.blockCounts[r], r++) {
    starts[r] = at;
    longest = std::max(longest, op.blockCounts[r]);
  }
  int rc = MPI_SUCCESS;
  for (size_t done = 0; done < longest && rc == MPI_SUCCESS; done += window) {
    size_t packed = 0;
    for (size_t r = 0; r < ranks; r++) {
      const size_t n = op.blockCounts[r] > done ? std::min(window, op.blockCounts[r] - done) : 0;
      if (n > 0) std::memcpy(scratch_.data() + packed * elementSize, input + (starts[r] + done) * elementSize, n * elementSize);
      counts[r] = static_cast<int>(n);
      packed += n;
    }
    rc = MPI_Reduce_scatter(scratch_.data(), output + done * elementSize, counts.data(), op.type, op.reduce,
                            comms_.collective);
  }
  return rc;
}

bool ProgressEngine::TestActive() {
  if (active_.empty()) return false;
  const int n = static_cast<int>(active_.size());
  requests_.resize(n);
  indices_.resize(n);
  statuses_.resize(n);
  for (int i = 0; i < n; i++) requests_[i] = active_[i]->request;
  int completed = 0;
  const int rc = MPI_Testsome(n, requests_.data(), &completed, indices_.data(), statuses_.data());
  if (completed == MPI_UNDEFINED || completed == 0) {
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
      for (auto& op : active_) Settle(*op, Failure::kMpi, Describe("testing the operation failed", rc), true);
      active_.clear();
      return true;
    }
    return false;
  }
  for (int k = 0; k < completed; k++) {
    Op& op = *active_[indices_[k]];
    const MPI_Status& status = statuses_[k];
    const int error = rc == MPI_ERR_IN_STATUS ? status.MPI_ERROR : MPI_SUCCESS;
    op.request = MPI_REQUEST_NULL;
    if (op.kind == OpKind::kRecv && !op.settled) {
      int cancelled = 0;
      MPI_Test_cancelled(&status, &cancelled);
      int received = 0;
      if (error == MPI_ERR_TRUNCATE) {
        Settle(op, Failure::kTruncated, "the message is longer than " + std::to_string(op.count) + " bytes", true);
      } else if (error != MPI_SUCCESS) {
        Settle(op, Failure::kMpi, Describe("the receive failed", error), true);
      } else if (MPI_Get_count(&status, MPI_BYTE, &received) == MPI_SUCCESS && !cancelled &&
                 static_cast<size_t>(received) != op.count) {
        Settle(op, Failure::kShort,
               "the message has " + std::to_string(received) + " bytes, expected " + std::to_string(op.count), true);
      } else {
        Settle(op, Failure::kNone, "", true);
      }
    } else if (error != MPI_SUCCESS) {
      Settle(op, Failure::kMpi, Describe("the send failed", error), true);
    } else {
      Settle(op, Failure::kNone, "", true);
    }
  }
  // Drop completed ops, keeping the order of the others.
  active_.erase(std::remove_if(active_.begin(), active_.end(),
                               [](const std::unique_ptr<Op>& op) { return op->request == MPI_REQUEST_NULL; }),
                active_.end());
  return true;
}

void ProgressEngine::EmitLinkError(int peer, std::string message) {
  Event event;
  event.type = Event::Type::kLinkError;
  event.peer = peer;
  event.message = std::move(message);
  Emit(std::move(event));
}

bool ProgressEngine::ProbeControl() {
  bool any = false;
  for (;;) {
    int flag = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, kControlTag, comms_.control, &flag, &message, &status) != MPI_SUCCESS || !flag) {
      return any;
    }
    any = true;
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    ControlRecv recv{status.MPI_SOURCE, std::vector<uint8_t>(static_cast<size_t>(bytes)), MPI_REQUEST_NULL,
                     Clock::now() + ioTimeout_, false};
    const int rc = MPI_Imrecv(recv.payload.data(), bytes, MPI_BYTE, &message, &recv.request);
    if (rc != MPI_SUCCESS) {
      EmitLinkError(recv.peer, Describe("receiving a control message failed", rc));
      continue;
    }
    controlRecvs_.push_back(std::move(recv));
  }
}

bool ProgressEngine::TestControl() {
  bool any = false;
  // Delivered in the order they were matched, which is the order each peer sent them.
  while (!controlRecvs_.empty()) {
    ControlRecv& head = controlRecvs_.front();
    int flag = 0;
    MPI_Status status;
    const int rc = MPI_Test(&head.request, &flag, &status);
    if (rc != MPI_SUCCESS) {
      EmitLinkError(head.peer, Describe("receiving a control message failed", rc));
    } else if (!flag) {
      return any;
    } else if (close_ == nullptr) {
      Event event;
      event.type = Event::Type::kControl;
      event.peer = head.peer;
      event.payload = std::move(head.payload);
      Emit(std::move(event));
    }
    any = true;
    controlRecvs_.pop_front();
  }
  return any;
}

void ProgressEngine::Expire(Clock::time_point now) {
  for (auto& op : active_) {
    if (op->settled || now < op->deadline) continue;
    if (op->kind == OpKind::kRecv) MPI_Cancel(&op->request);
    // A send cannot be taken back: MPI keeps its buffer until the peer receives, or forever.
    Settle(*op, Failure::kTimeout, "", false);
  }
  for (auto& recv : controlRecvs_) {
    if (recv.expired || now < recv.deadline) continue;
    recv.expired = true;
    EmitLinkError(recv.peer, "a control message from this rank did not arrive whole in time");
  }
}

void ProgressEngine::BeginClose(std::unique_ptr<Op> op) {
  close_ = std::move(op);
  for (auto& pending : active_) {
    if (pending->settled) continue;
    if (pending->kind == OpKind::kRecv) MPI_Cancel(&pending->request);
    Settle(*pending, Failure::kClosed, "the MPI transport was closed", false);
  }
}

// Called every round once closing. True when the thread may exit.
bool ProgressEngine::CloseStep(Clock::time_point now) {
  auto finish = [this](bool clean, const std::string& reason) {
    Event event;
    event.type = Event::Type::kClosed;
    event.id = close_->id;
    event.failure = clean ? Failure::kNone : Failure::kTimeout;
    event.message = reason;
    Emit(std::move(event));
    return true;
  };
  const bool late = now >= close_->deadline;
  if (!barrierPosted_) {
    if (!active_.empty() || !controlRecvs_.empty()) {
      if (!late) return false;
      return finish(false, std::to_string(active_.size()) + " MPI operation(s) still in flight at the deadline");
    }
    const int rc = MPI_Ibarrier(comms_.collective, &barrier_);
    if (rc != MPI_SUCCESS) return finish(false, Describe("the closing barrier failed", rc));
    barrierPosted_ = true;
  }
  int flag = 0;
  const int rc = MPI_Test(&barrier_, &flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) return finish(false, Describe("the closing barrier failed", rc));
  if (flag) return finish(true, "");
  if (late) return finish(false, "not every rank reached shutdown before the deadline");
  return false;
}

}  // namespace ringreduce
