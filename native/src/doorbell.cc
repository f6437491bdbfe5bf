#include "doorbell.h"

#include <cstring>

#ifdef __linux__
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#endif

namespace ringreduce {

namespace {

// What each rank contributes to the exchange.
struct Record {
  int nodeLeader;  // lowest world rank on this rank's node
  int length;      // of the address; 0 = no doorbell
  char path[sizeof(sockaddr_un::sun_path)];
};

int NodeLeader(MPI_Comm comm, int rank) {
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) != MPI_SUCCESS) return rank;
  int leader = rank;
  MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, node);
  MPI_Comm_free(&node);
  return leader;
}

}  // namespace

std::unique_ptr<Doorbell> Doorbell::Create(MPI_Comm comm) {
  std::unique_ptr<Doorbell> bell(new Doorbell());
  int size = 0;
  MPI_Comm_rank(comm, &bell->rank_);
  MPI_Comm_size(comm, &size);
  Record mine{};
  mine.nodeLeader = NodeLeader(comm, bell->rank_);
#ifdef __linux__
  bell->fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (bell->fd_ >= 0) {
    sockaddr_un self{};
    self.sun_family = AF_UNIX;
    // Binding just the family autobinds: the kernel picks a unique abstract name.
    const bool bound = bind(bell->fd_, reinterpret_cast<sockaddr*>(&self), sizeof(sa_family_t)) == 0;
    socklen_t length = sizeof(self);
    if (bound && getsockname(bell->fd_, reinterpret_cast<sockaddr*>(&self), &length) == 0 &&
        length > sizeof(sa_family_t)) {
      mine.length = static_cast<int>(length - sizeof(sa_family_t));
      std::memcpy(mine.path, self.sun_path, static_cast<size_t>(mine.length));
    } else {
      close(bell->fd_);
      bell->fd_ = -1;
    }
  }
#endif
  std::vector<Record> all(static_cast<size_t>(size));
  MPI_Allgather(&mine, sizeof(Record), MPI_BYTE, all.data(), sizeof(Record), MPI_BYTE, comm);
  bell->peers_.resize(static_cast<size_t>(size));
  bell->coversAll_ = bell->fd_ >= 0;
  for (int r = 0; r < size; r++) {
    const Record& record = all[static_cast<size_t>(r)];
    const bool reachable = record.length > 0 && record.nodeLeader == mine.nodeLeader && bell->fd_ >= 0;
    if (r != bell->rank_ && !reachable) bell->coversAll_ = false;
    if (!reachable) continue;
    Address& address = bell->peers_[static_cast<size_t>(r)];
    address.addr.sun_family = AF_UNIX;
    std::memcpy(address.addr.sun_path, record.path, static_cast<size_t>(record.length));
    address.length = static_cast<socklen_t>(sizeof(sa_family_t) + record.length);
  }
  return bell;
}

Doorbell::~Doorbell() {
#ifdef __linux__
  if (fd_ >= 0) close(fd_);
#endif
}

void Doorbell::Ring(int peer) const {
#ifdef __linux__
  if (fd_ < 0 || peer < 0 || static_cast<size_t>(peer) >= peers_.size()) return;
  const Address& address = peers_[static_cast<size_t>(peer)];
  if (address.length == 0) return;
  const char byte = 1;
  // EAGAIN: the peer's socket is full of rings it has not read yet, which wake it all the same.
  (void)sendto(fd_, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&address.addr),
               address.length);
#endif
}

void Doorbell::RingSelf() const { Ring(rank_); }

bool Doorbell::Wait(std::chrono::nanoseconds timeout) const {
#ifdef __linux__
  if (fd_ < 0) return false;
  pollfd entry{fd_, POLLIN, 0};
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const timespec ts{static_cast<time_t>(seconds.count()), static_cast<long>((timeout - seconds).count())};
  if (ppoll(&entry, 1, &ts, nullptr) > 0) {
    char buffer[64];
    while (recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT) > 0) {
    }
    return true;
  }
#endif
  return false;
}

}  // namespace ringreduce
