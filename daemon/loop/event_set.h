// What a sleeping engine waits on, in one epoll set: its wake fd, every
// client's SQ doorbell, the transports' event fds and the channel layer's
// pending connects. Each fd carries a tag the wait hands back.
#pragma once

#include <sys/epoll.h>

#include <cstdint>

namespace ferry::daemon {

class EventSet {
 public:
  EventSet();  // throws at start-up when epoll cannot be had
  ~EventSet();
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;

  // Readable `fd` wakes the sleep. `edge`: report each new readiness once
  // (for an fd never read here, like a client's SQ doorbell).
  [[nodiscard]] bool add(int fd, std::uint64_t tag, bool edge = false) noexcept;
  void remove(int fd) noexcept;
  // The epoll fd itself: readable while an event waits (a host engine
  // watches a hosted engine's set with it, engines/compaction.h).
  int fd() const noexcept { return fd_; }
  // Sleeps up to timeout_ms (-1: until an event); f(tag) for each event.
  template <typename F>
  int wait(int timeout_ms, F&& f) noexcept {
    epoll_event evs[64];
    const int n = ::epoll_wait(fd_, evs, 64, timeout_ms);
    for (int i = 0; i < n; ++i) f(evs[i].data.u64);
    return n;
  }

 private:
  int fd_ = -1;
};

}  // namespace ferry::daemon
