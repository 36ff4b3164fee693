// A doorbell between a producer and a sleeping consumer (see the sleep
// protocol in ring.h): an eventfd, or the end of a pipe (create_ringer_pipe).
// Non-blocking, close-on-exec; ring() and drain() work on either kind.
#pragma once

#include "ferry/result.h"

namespace ferry::shm {

class Doorbell {
 public:
  Doorbell() = default;
  explicit Doorbell(int fd) noexcept : fd_(fd) {}  // takes ownership
  ~Doorbell();
  Doorbell(Doorbell&& o) noexcept : fd_(o.fd_), peer_fd_(o.peer_fd_) { o.fd_ = o.peer_fd_ = -1; }
  Doorbell& operator=(Doorbell&& o) noexcept;
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  // An eventfd: one object both sides may ring and wait on (each side then
  // shares the open file description, and with it the O_NONBLOCK flag).
  [[nodiscard]] static Result<Doorbell> create();
  // A doorbell this process rings and another, untrusted one waits on: a
  // pipe. This object keeps the write end, an open file description of its
  // own: whatever the other side does to its end (clearing O_NONBLOCK,
  // never reading until the pipe is full, closing it) cannot make ring()
  // block. peer_fd() is the read end to hand over; release_peer() closes
  // our copy once it has been. (The writer must ignore SIGPIPE.)
  [[nodiscard]] static Result<Doorbell> create_ringer_pipe();

  int fd() const noexcept { return fd_; }
  int peer_fd() const noexcept { return peer_fd_; }  // -1 unless from create_ringer_pipe, before release_peer
  void release_peer() noexcept;
  bool valid() const noexcept { return fd_ >= 0; }
  void ring() const noexcept;   // one 8-byte write; never blocks on our own non-blocking end
  void drain() const noexcept;  // consume pending rings; a bounded number of non-blocking reads
  // Waits until rung or timeout_ms passes (-1: forever). true when rung.
  [[nodiscard]] bool wait(int timeout_ms) const noexcept;

 private:
  int fd_ = -1;
  int peer_fd_ = -1;
};

}  // namespace ferry::shm
