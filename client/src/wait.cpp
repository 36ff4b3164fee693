// Sleeping: the consumer half of ring.h's doorbell protocol on the CQ, plus
// hang-up detection on the attach socket. Both fds sit in one epoll set,
// which is also what event_fd() hands to applications.
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "client/src/client_impl.h"

namespace ferry {

void Client::Impl::check_hangup() noexcept {
  if (state_ != Status::Ok) return;
  pollfd p{socket_fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return;
  bool gone = (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
  if (!gone && (p.revents & POLLIN) != 0) {
    // The daemon sends nothing after the attach reply; read and drop
    // anything it does send, and treat end-of-stream as hang-up.
    char scratch[64];
    const ssize_t r = ::recv(socket_fd_, scratch, sizeof scratch, MSG_DONTWAIT);
    gone = r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
  }
  if (gone) {
    spdlog::info("ferry: daemon connection closed; {} operations in flight fail with DaemonGone", inflight_.live());
    state_ = Status::DaemonGone;
  }
}

void Client::Impl::detach() noexcept {
  if (socket_fd_ < 0) return;
  ::close(socket_fd_);  // also leaves the epoll set; the daemon sees the hang-up
  socket_fd_ = -1;
  if (state_ == Status::Ok) state_ = Status::Cancelled;
  spdlog::debug("ferry: detached; {} operations in flight complete Cancelled", inflight_.live());
}

void Client::Impl::sleep_for_cq(int timeout_ms) noexcept {
  // The announcement lives in the ring header only: the daemon claims it
  // when it rings (for a completion a control op's pump may already have
  // taken), so look there, not at a copy of our own.
  if (!cq_.announced()) {
    cq_bell_.drain();
    if (!cq_.prepare_to_sleep()) return;  // work arrived: do not sleep
  }
  epoll_event events[2];
  const int n = ::epoll_wait(epoll_fd_, events, 2, timeout_ms);
  for (int i = 0; i < n; ++i) {
    if (events[i].data.fd == socket_fd_) {
      check_hangup();
    } else {
      cq_bell_.drain();
    }
  }
}

std::size_t Client::Impl::wait(std::span<Completion> out, std::chrono::milliseconds timeout) noexcept {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  for (;;) {
    const std::size_t n = poll(out);
    if (n != 0 || state_ != Status::Ok || out.empty()) return n;
    const auto left = deadline - clock::now();
    if (left <= clock::duration::zero()) return 0;
    // Round up: a sub-millisecond remainder must still sleep, not spin.
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    sleep_for_cq(static_cast<int>(std::min<long long>(ms, 1 << 30)));
  }
}

}  // namespace ferry
