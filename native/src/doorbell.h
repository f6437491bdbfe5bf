// Doorbell: lets a rank wake a sleeping peer's progress thread the moment it sends it a control
// message, so an idle engine can sleep for long stretches (no CPU) without making the next
// negotiation wait. MPI has no such wake-up: Open MPI's shared-memory transport is polled.
//
// How it works (Linux): every rank binds a datagram socket in the abstract Unix namespace
// (autobind: the kernel picks a unique name); the ranks exchange the names and their node
// (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)) with MPI_Allgather. After posting a control
// message to a peer on the same node, the sender writes one byte to the peer's socket; the
// receiver's progress thread sleeps in ppoll() on its socket, which the JS thread also rings to
// hand it new work. A peer on another node cannot be rung: with one of those, the idle sleep
// stays short (the progress thread polls for its messages). Elsewhere than Linux, or when
// anything fails, there is no doorbell and the engine polls.
#pragma once

#include <mpi.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <memory>
#include <vector>

namespace ringreduce {

class Doorbell {
 public:
  // Collective over `comm` (every rank calls it at the same point). Never null; check Usable().
  static std::unique_ptr<Doorbell> Create(MPI_Comm comm);
  ~Doorbell();
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  bool Usable() const { return fd_ >= 0; }
  // Every other rank is on this node and has a doorbell: nobody needs to be polled for.
  bool CoversAllPeers() const { return coversAll_; }
  // Wakes `peer` (a no-op when it has no doorbell). Any thread.
  void Ring(int peer) const;
  // Wakes this rank's own progress thread. Any thread.
  void RingSelf() const;
  // Sleeps until rung or `timeout`, then empties the socket. True when rung. The progress
  // thread only.
  bool Wait(std::chrono::nanoseconds timeout) const;

 private:
  Doorbell() = default;
  struct Address {
    sockaddr_un addr{};
    socklen_t length = 0;  // 0: no doorbell
  };
  int fd_ = -1;
  int rank_ = 0;
  bool coversAll_ = false;
  std::vector<Address> peers_;
};

}  // namespace ringreduce
