// Doorbell: ringing never blocks (an eventfd counter at its maximum, or a
// full pipe, means a wake-up is pending anyway), waiting polls with a
// timeout and then drains, so one wait consumes any number of rings.
#include "shm/doorbell.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

namespace ferry::shm {

namespace {

void close_fd(int& fd) noexcept {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

Doorbell::~Doorbell() {
  close_fd(fd_);
  close_fd(peer_fd_);
}

Doorbell& Doorbell::operator=(Doorbell&& o) noexcept {
  if (this != &o) {
    close_fd(fd_);
    close_fd(peer_fd_);
    fd_ = std::exchange(o.fd_, -1);
    peer_fd_ = std::exchange(o.peer_fd_, -1);
  }
  return *this;
}

Result<Doorbell> Doorbell::create() {
  int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return Result<Doorbell>::fail(Status::NoMemory);
  return Result<Doorbell>::ok(Doorbell(fd));
}

Result<Doorbell> Doorbell::create_ringer_pipe() {
  int fds[2];
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return Result<Doorbell>::fail(Status::NoMemory);
  Doorbell d(fds[1]);
  d.peer_fd_ = fds[0];
  return Result<Doorbell>::ok(std::move(d));
}

void Doorbell::release_peer() noexcept { close_fd(peer_fd_); }

void Doorbell::ring() const noexcept {
  // eventfd: adds 1; EAGAIN only at the counter's maximum. pipe: 8 bytes;
  // EAGAIN when full, EPIPE when the reader is gone. Either way nothing is
  // owed: a full doorbell is a pending wake-up.
  // The raw system call: glibc's write() is a cancellation point that wraps
  // every call in two more (no thread here is ever cancelled).
  const std::uint64_t one = 1;
  [[maybe_unused]] const long n = ::syscall(SYS_write, fd_, &one, sizeof one);
}

void Doorbell::drain() const noexcept {
  // An eventfd read takes the whole counter (8 bytes); a pipe read takes up
  // to the buffer. A short read leaves it empty. Bounded: a peer that keeps
  // ringing cannot hold us here (a level-triggered watcher reports it again).
  std::uint64_t buf[64];
  for (int i = 0; i < 16; ++i) {
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < static_cast<ssize_t>(sizeof buf)) return;
  }
}

bool Doorbell::wait(int timeout_ms) const noexcept {
  pollfd p{fd_, POLLIN, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, timeout_ms);
  } while (rc < 0 && errno == EINTR);  // a signal restarts the full timeout; callers loop on deadlines anyway
  if (rc <= 0 || (p.revents & POLLIN) == 0) return false;
  drain();
  return true;
}

}  // namespace ferry::shm
