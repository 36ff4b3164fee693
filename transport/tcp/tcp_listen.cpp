// TcpTransport's listener: listen, accepting under the accept guard's
// budget and per-source caps, pausing accepts while descriptors run out, and
// the timer that ends silent connections and resumes accepts. Control path.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "ferry/mono_clock.h"
#include "transport/deadline_timer.h"
#include "transport/tcp/tcp_address.h"
#include "transport/tcp/tcp_transport.h"

namespace ferry::transport::tcp {
namespace {

// A connection turned away for want of room hears why before it closes:
// Goodbye(Busy) in place of a HelloAck, so a peer daemon waits for room
// rather than taking this host for dead (docs/protocol.md, "Connection
// set-up"). Best effort: one non-blocking send into an empty socket.
void say_no_room(int fd) noexcept {
  wire::Header bye;
  bye.type = wire::MsgType::Goodbye;
  bye.status = Status::Busy;
  std::array<std::byte, wire::kHeaderBytes> frame{};
  wire::encode_header(bye, frame);
  (void)::send(fd, frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace

Result<std::uint16_t> TcpTransport::listen(std::string_view host, std::uint16_t port) {
  owner_.check();
  if (listen_fd_ >= 0) return Result<std::uint16_t>::fail(Status::Busy);
  sockaddr_storage ss;
  socklen_t len = 0;
  if (!parse_address(host, port, ss, len)) return Result<std::uint16_t>::fail(Status::BadRequest);
  const int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Result<std::uint16_t>::fail(Status::NoMemory);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  // Accepted sockets inherit buffer sizes; setting them here makes them
  // apply before the handshake fixes the window scale.
  if (configure_socket(fd) != Status::Ok) {
    ::close(fd);
    return Result<std::uint16_t>::fail(Status::BadRequest);
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      ::listen(fd, static_cast<int>(config_.listen_backlog)) != 0) {
    const int err = errno;
    ::close(fd);
    return Result<std::uint16_t>::fail(err == EADDRINUSE || err == EACCES ? Status::Busy : Status::BadRequest);
  }
  sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen);
  const std::uint16_t bound_port =
      ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerTag;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    ::close(fd);
    return Result<std::uint16_t>::fail(Status::NoMemory);
  }
  listen_fd_ = fd;
  if (!is_wildcard(ss)) (void)parse_address(host, 0, source_, source_len_);  // parsed above: cannot fail
  spdlog::debug("tcp transport: listening on {}:{}", host, bound_port);
  return Result<std::uint16_t>::ok(bound_port);
}
std::size_t TcpTransport::accept_ready(std::span<Completion> out) noexcept {
  std::size_t n = 0;
  while (n < out.size()) {
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &from_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      accept_pending_ = false;  // EAGAIN: the backlog is empty
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) pause_accepts(err);
      break;
    }
    accept_wait_ms_ = kAcceptFirstWaitMs;
    // Refused ones are closed rather than left in the backlog, where they
    // would keep the listener readable and spin the owner.
    if (admit(fd, from, out[n])) ++n;
  }
  return n;
}

void TcpTransport::pause_accepts(int err) noexcept {
  if (listen_fd_ < 0 || accept_paused_) return;
  // Out of the epoll set: the queued connection keeps the listener
  // readable, and a level-triggered listener would wake the owner on every
  // turn (a core at 100 %) until a descriptor frees.
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr) != 0) return;
  accept_paused_ = true;
  const std::uint64_t now = mono_ns();
  accept_resume_ns_ = now + std::uint64_t{accept_wait_ms_} * 1'000'000;
  if constexpr (FERRY_DATAPATH_STATS) ++stats_.accept_pauses;
  if (std::uint64_t skipped = 0; accept_log_.allow(now, skipped)) {
    spdlog::warn(
        "tcp transport: accept on the peer listener failed: {} ({} more such failures since the last such line); "
        "pausing accepts for {} ms. Descriptors: see the process's limit (LimitNOFILE=) and peer-max-connections",
        std::strerror(err), skipped, accept_wait_ms_);
  }
  accept_wait_ms_ = std::min(accept_wait_ms_ * 2, kAcceptMaxWaitMs);
  arm_timer();
}

void TcpTransport::resume_accepts() noexcept {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerTag;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev) != 0) {
    // Cannot watch it yet (ENOMEM): try again after the next pause.
    accept_resume_ns_ = mono_ns() + std::uint64_t{accept_wait_ms_} * 1'000'000;
    return;
  }
  accept_paused_ = false;
  accept_pending_ = true;  // what queued meanwhile is accepted in this poll
}

bool TcpTransport::admit(int fd, const sockaddr_storage& from, Completion& c) noexcept {
  const AcceptGuard::Source src = AcceptGuard::source_of(from);
  const std::uint64_t now = mono_ns();
  // Each eviction frees a place in the counts; twice is the most one
  // admission needs (its source's cap, then the budget). An evicted slot
  // frees only once its Closed is reported: with no other free slot the new
  // connection is refused, and the next one finds the room.
  for (int round = 0; round < 3; ++round) {
    const AcceptGuard::Decision d = guard_.admit(src, alloc_slot() >= 0);
    if (d.verdict == AcceptGuard::Verdict::Refuse) break;
    if (d.verdict == AcceptGuard::Verdict::Evict) {
      guard_.evicted();
      begin_drain(d.victim, Status::PeerReset);  // the owner hears Closed
      if (alloc_slot() < 0) break;
      continue;
    }
    const int slot = alloc_slot();
    if (slot < 0) break;
    if (configure_socket(fd) != Status::Ok) {  // no TCP_NODELAY: latency we do not offer
      ::close(fd);
      return false;
    }
    c = Completion{};
    c.kind = CompletionKind::Accepted;
    c.conn = install(slot, fd);
    guard_.accepted(static_cast<std::uint32_t>(slot), src, now);
    arm_timer();
    return true;
  }
  say_no_room(fd);
  ::close(fd);
  guard_.refused(now);
  if constexpr (FERRY_DATAPATH_STATS) ++stats_.accepts_refused;
  return false;
}

void TcpTransport::arm_timer() noexcept {
  std::uint64_t at = guard_.next_deadline_ns();
  if (accept_paused_ && (at == 0 || accept_resume_ns_ < at)) at = accept_resume_ns_;
  arm_timer_at(timer_fd_, at);  // 0: none, disarmed
}

void TcpTransport::expire_silent() noexcept {
  std::uint64_t expiry = 0;
  while (::read(timer_fd_, &expiry, sizeof expiry) > 0) {
  }
  timer_due_ = false;
  if (accept_paused_ && mono_ns() >= accept_resume_ns_) resume_accepts();
  AttentionMask<kMaxConnections> due;
  if (guard_.expired(mono_ns(), due) != 0) {
    for (std::uint32_t s = due.next(0); s != decltype(due)::kNone; s = due.next(s + 1))
      begin_drain(s, Status::PeerReset);
  }
  arm_timer();
}

void TcpTransport::vouch(ConnId conn) noexcept {
  if (lookup(conn) != nullptr) guard_.vouch((conn & 0xFFFFu) - 1);
}

Transport::AcceptCounts TcpTransport::accept_counts() const noexcept {
  const AcceptGuardStats& g = guard_.stats();
  return AcceptCounts{g.refused, g.evicted, g.timed_out};
}
}  // namespace ferry::transport::tcp
