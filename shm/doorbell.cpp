// Doorbell: a non-blocking eventfd. Ringing never blocks (a counter already
// at its maximum means a wake-up is pending anyway), waiting polls with a
// timeout and then drains, so one wait consumes any number of rings.
#include "shm/doorbell.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

namespace ferry::shm {

Doorbell::~Doorbell() {
  if (fd_ >= 0) ::close(fd_);
}

Doorbell& Doorbell::operator=(Doorbell&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

Result<Doorbell> Doorbell::create() {
  int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return Result<Doorbell>::fail(Status::NoMemory);
  return Result<Doorbell>::ok(Doorbell(fd));
}

void Doorbell::ring() const noexcept {
  // EAGAIN: counter saturated, the sleeper will wake regardless.
  (void)::eventfd_write(fd_, 1);
}

void Doorbell::drain() const noexcept {
  eventfd_t value;
  while (::eventfd_read(fd_, &value) == 0) {
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
