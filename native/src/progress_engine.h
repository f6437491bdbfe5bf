// The progress thread: the one thread that calls MPI between MPI_Init_thread and MPI_Finalize
// (both on the engine's worker thread), so the JS event loop never blocks inside MPI.
//
// How it works. The JS thread submits Ops to a queue; the thread starts them: point-to-point
// sends and receives as MPI_Isend/MPI_Irecv, collectives as Open MPI's tuned blocking calls
// (MPI_Allreduce, MPI_Reduce and MPI_Reduce_scatter in pieces of at most 2 MiB, MPI_Allgatherv,
// MPI_Bcast, MPI_Alltoallv, MPI_Gatherv, MPI_Scatterv; in place where MPI allows; the
// non-blocking MPI_I* versions are 30-140% slower at 1-16 MiB here). It completes requests
// with MPI_Testsome, receives control messages with MPI_Improbe + MPI_Imrecv (any size, in
// order per peer), and hands back Events, waking the JS thread through `notify` (a thread-safe
// function).
//
// Pacing. While a request is in flight it polls like MPI's own blocking calls do, yielding the
// core every round. With nothing in flight it sleeps, and a submit from the JS thread wakes it at
// once. A peer that sends it a control message rings its doorbell (doorbell.h) to wake it too;
// the sleep, 1/32 of the time since the last activity, then grows to 1 s (a safety net), so an
// idle engine uses no CPU. Where some peer cannot ring (another node, no doorbell) the sleep
// stops at 10 ms, which is how often it then looks for control messages: an idle engine wakes
// at most 100 times a second, and a control message after an idle spell of T waits at most
// ~T/32.
//
// Deadlines and shutdown. A send or receive not complete by its deadline is settled with
// kTimeout (a receive is also cancelled); MPI may still own a send's buffer, so its reference
// is released only when the request completes (Event kRelease). Close settles what is pending
// with kClosed, waits (until its deadline) for requests to finish, then runs MPI_Ibarrier on
// the collective communicator with the same deadline: a clean close means every rank reached
// it and nothing is in flight, so MPI_Finalize will not block. The thread then exits; no
// thread is ever left inside MPI. Blocking collectives have no deadline here: mpi_collectives.ts
// aborts the job when one overruns (no rank can leave an MPI collective alone).
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "doorbell.h"
#include "op.h"

namespace ringreduce {

struct Communicators {
  MPI_Comm data = MPI_COMM_NULL;        // point-to-point data, tagged
  MPI_Comm control = MPI_COMM_NULL;     // control messages, tag 0
  MPI_Comm collective = MPI_COMM_NULL;  // native collectives and the closing barrier
};

class ProgressEngine {
 public:
  ProgressEngine(Communicators comms, int size, Clock::duration ioTimeout, std::unique_ptr<Doorbell> doorbell,
                 std::function<void()> notify);
  ~ProgressEngine();
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  // Any thread. Ops submitted after a kClose are settled with kClosed.
  void Submit(std::unique_ptr<Op> op);
  // The JS thread: the events so far, in order.
  std::vector<Event> TakeEvents();
  // Waits up to `timeout` for the thread to exit and joins it. False: it is still inside a
  // blocking collective.
  bool Join(std::chrono::milliseconds timeout);

 private:
  void Run();
  void Start(std::unique_ptr<Op> op);
  void RunCollective(Op& op);
  int ReduceScatter(Op& op);
  void BeginClose(std::unique_ptr<Op> op);
  bool TestActive();
  bool ProbeControl();
  bool TestControl();
  void Expire(Clock::time_point now);
  bool CloseStep(Clock::time_point now);
  bool AwaitingAnything() const;
  void Settle(Op& op, Failure failure, std::string message, bool release);
  void Emit(Event event);
  // A broken link to `peer`: the JS side fails the job, naming it.
  void EmitLinkError(int peer, std::string message);
  Clock::duration IdleSleep(Clock::duration idle) const;

  struct ControlRecv {
    int peer;
    std::vector<uint8_t> payload;
    MPI_Request request;
    Clock::time_point deadline;
    bool expired;
  };

  const Communicators comms_;
  const int size_;
  const Clock::duration ioTimeout_;
  const std::unique_ptr<Doorbell> doorbell_;
  const std::function<void()> notify_;

  std::mutex mutex_;  // guards incoming_, sleeping_, events_, exited_
  std::condition_variable wake_;
  std::condition_variable exitedCv_;
  std::vector<std::unique_ptr<Op>> incoming_;
  std::vector<Event> events_;
  bool sleeping_ = false;
  bool exited_ = false;

  // Owned by the progress thread.
  std::vector<std::unique_ptr<Op>> active_;
  std::deque<ControlRecv> controlRecvs_;
  std::vector<MPI_Request> requests_;  // scratch for MPI_Testsome
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  std::vector<char> scratch_;  // reduce-scatter: one call's input, packed
  std::unique_ptr<Op> close_;
  MPI_Request barrier_ = MPI_REQUEST_NULL;
  bool barrierPosted_ = false;

  std::thread thread_;
};

}  // namespace ringreduce
