// An eventfd used as a doorbell between a producer and a sleeping consumer
// (see the sleep protocol in ring.h). Non-blocking, close-on-exec.
#pragma once

#include "ferry/result.h"

namespace ferry::shm {

class Doorbell {
 public:
  Doorbell() = default;
  explicit Doorbell(int fd) noexcept : fd_(fd) {}  // takes ownership
  ~Doorbell();
  Doorbell(Doorbell&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Doorbell& operator=(Doorbell&& o) noexcept;
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  static Result<Doorbell> create();

  int fd() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  void ring() const noexcept;   // eventfd_write(1); never blocks
  void drain() const noexcept;  // consume pending rings; never blocks
  // Waits until rung or timeout_ms passes (-1: forever). true when rung.
  bool wait(int timeout_ms) const noexcept;

 private:
  int fd_ = -1;
};

}  // namespace ferry::shm
