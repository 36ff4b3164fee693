// TcpTransport's dialling: connect (blocking, for at most the configured
// connect timeout) and connect_async (in the background, finished by poll).
// Control path: only connect() blocks.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

#include "ferry/mono_clock.h"
#include "transport/tcp/tcp_address.h"
#include "transport/tcp/tcp_transport.h"

namespace ferry::transport::tcp {

Result<int> TcpTransport::connect_start(std::string_view host, std::uint16_t port) {
  owner_.check();
  sockaddr_storage ss;
  socklen_t len = 0;
  if (!parse_address(host, port, ss, len)) return Result<int>::fail(Status::BadRequest);
  const int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Result<int>::fail(Status::NoMemory);
  // Buffer sizes before connect: the SYN fixes the window scale.
  if (configure_socket(fd) != Status::Ok) {
    ::close(fd);
    return Result<int>::fail(Status::BadRequest);
  }
  // From the listen address when it names one interface: the peer then
  // knows this connection's source as our address (on a host whose two
  // addresses are both local, the kernel would otherwise pick the
  // destination's). Not a loopback source toward another host.
  if (source_len_ != 0 && source_.ss_family == ss.ss_family && (!is_loopback(source_) || is_loopback(ss))) {
    const int one = 1;  // the port is chosen by connect(), per 4-tuple, not reserved by bind()
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&source_), source_len_) != 0) {
      const int err = errno;
      ::close(fd);
      spdlog::debug("tcp transport: binding the dial to {}:{} to the listen address failed: {}", host, port,
                    std::strerror(err));
      return Result<int>::fail(Status::PeerUnreachable);
    }
  }
  const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&ss), len);
  // EINTR: an interrupted connect goes on in the background, like EINPROGRESS.
  if (rc != 0 && errno != EINPROGRESS && errno != EINTR) {
    const int err = errno;
    ::close(fd);
    spdlog::debug("tcp transport: connect {}:{} failed: {}", host, port, std::strerror(err));
    return Result<int>::fail(Status::PeerUnreachable);
  }
  return Result<int>::ok(fd);
}

int TcpTransport::connect_result(int fd) noexcept {
  pollfd pfd{fd, POLLOUT, 0};
  const int rc = ::poll(&pfd, 1, 0);
  if (rc < 0) return errno == EINTR ? EINPROGRESS : errno;
  if (rc == 0) return EINPROGRESS;
  int err = 0;
  socklen_t elen = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) err = errno;
  return err;
}

Result<ConnId> TcpTransport::connect(std::string_view host, std::uint16_t port) {
  owner_.check();
  const int slot = alloc_slot();
  if (slot < 0) return Result<ConnId>::fail(Status::Busy);
  auto started = connect_start(host, port);
  if (!started) return Result<ConnId>::fail(started.status);
  const int fd = started.value;
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(config_.connect_timeout_ms);
  int err = EINPROGRESS;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      err = ETIMEDOUT;
      break;
    }
    pollfd pfd{fd, POLLOUT, 0};
    const int rc = ::poll(&pfd, 1, static_cast<int>(left));
    if (rc <= 0) continue;  // EINTR or timeout: the deadline check above decides
    err = connect_result(fd);
    if (err != EINPROGRESS) break;
  }
  if (err != 0) {
    ::close(fd);
    spdlog::debug("tcp transport: connect {}:{} failed: {}", host, port, std::strerror(err));
    return Result<ConnId>::fail(Status::PeerUnreachable);
  }
  return Result<ConnId>::ok(install(slot, fd));
}

Result<ConnId> TcpTransport::connect_async(std::string_view host, std::uint16_t port) {
  owner_.check();
  const int slot = alloc_slot();
  if (slot < 0) return Result<ConnId>::fail(Status::Busy);
  auto started = connect_start(host, port);
  if (!started) return Result<ConnId>::fail(started.status);
  TcpConnection& c = conns_[slot];
  c.start(started.value, ConnState::Connecting);
  c.connect_deadline_ns = mono_ns() + std::uint64_t{config_.connect_timeout_ms} * 1'000'000;
  epoll_event ev{};
  ev.events = EPOLLOUT | EPOLLRDHUP;  // writable once connected; EPOLLERR/EPOLLHUP: refused, unreachable
  ev.data.u64 = static_cast<std::uint64_t>(slot);
  ++connecting_;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev) != 0) {
    begin_drain(static_cast<std::uint32_t>(slot), Status::PeerUnreachable);  // reported Closed by poll
  }
  return Result<ConnId>::ok(id_of(static_cast<std::uint32_t>(slot)));
}

void TcpTransport::connecting_done(std::uint32_t slot, std::span<Completion> out, std::size_t& n) noexcept {
  TcpConnection& c = conns_[slot];
  if (n == out.size()) {  // no room for its completion: the next poll
    attention_.set(slot);
    return;
  }
  int err = connect_result(c.fd);
  if (err == EINPROGRESS) {
    if (mono_ns() < c.connect_deadline_ns) return;  // its EPOLLOUT, or the deadline, comes back here
    err = ETIMEDOUT;
  }
  if (err != 0) {
    spdlog::debug("tcp transport: connect (slot {}) failed: {}", slot,
                  err == ETIMEDOUT ? "no answer within the connect timeout" : std::strerror(err));
    begin_drain(slot, Status::PeerUnreachable);  // Closed follows in this service pass
    return;
  }
  --connecting_;
  c.state = ConnState::Open;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = slot;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev) != 0) {
    begin_drain(slot, Status::PeerUnreachable);
    return;
  }
  out[n] = Completion{};
  out[n].kind = CompletionKind::Connected;
  out[n].conn = id_of(slot);
  ++n;
}

void TcpTransport::expire_connects() noexcept {
  const std::uint64_t now = mono_ns();
  for (std::uint32_t i = 0; i < config_.max_connections; ++i) {
    if (conns_[i].state == ConnState::Connecting && now >= conns_[i].connect_deadline_ns) attention_.set(i);
  }
}
}  // namespace ferry::transport::tcp
