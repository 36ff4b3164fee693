// TcpTransport setup: construction, listen, connect (blocking with a deadline,
// or in the background: connect_async, finished by poll), accept, close and
// the connection slot table. Not on the datapath: may allocate; only
// connect() blocks, for at most the configured connect timeout.
#include "transport/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

namespace ferry::transport::tcp {
namespace {

std::uint64_t mono_now_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// Numeric IPv4 or IPv6 only: name resolution belongs to the caller's control
// path, not to a transport that must not block unboundedly.
bool parse_address(std::string_view host, std::uint16_t port, sockaddr_storage& ss, socklen_t& len) {
  const std::string h(host);
  std::memset(&ss, 0, sizeof ss);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof(sockaddr_in);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

bool is_wildcard(const sockaddr_storage& ss) noexcept {
  if (ss.ss_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr == htonl(INADDR_ANY);
  return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr);
}

bool is_loopback(const sockaddr_storage& ss) noexcept {
  if (ss.ss_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
  }
  return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr);
}

AcceptGuardConfig guard_config(const TcpConfig& c) noexcept {
  AcceptGuardConfig g;
  g.max_connections = c.max_connections;
  g.reserve = c.reserved_slots;
  g.per_source = c.max_unvouched_per_source;
  g.hello_timeout_ms = c.hello_timeout_ms;
  return g;
}

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

Result<std::unique_ptr<TcpTransport>> TcpTransport::create(const TcpConfig& config) {
  if (config.validate() != Status::Ok) return Result<std::unique_ptr<TcpTransport>>::fail(Status::BadRequest);
  auto fault = tcp_fault_from_env();  // test-only switch; logs when set
  if (!fault) return Result<std::unique_ptr<TcpTransport>>::fail(fault.status);
  std::unique_ptr<TcpTransport> t(new TcpTransport(config));
  if (t->epoll_fd_ < 0 || t->timer_fd_ < 0 || !t->memory_.mapped()) {
    return Result<std::unique_ptr<TcpTransport>>::fail(Status::NoMemory);
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTimerTag;
  if (epoll_ctl(t->epoll_fd_, EPOLL_CTL_ADD, t->timer_fd_, &ev) != 0) {
    return Result<std::unique_ptr<TcpTransport>>::fail(Status::NoMemory);
  }
  t->fault_ = fault.value;
  return Result<std::unique_ptr<TcpTransport>>::ok(std::move(t));
}

TcpTransport::TcpTransport(const TcpConfig& config)
    : config_(config),
      epoll_fd_(epoll_create1(EPOLL_CLOEXEC)),
      timer_fd_(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)),
      guard_(guard_config(config), "peer listener"),
      memory_(config.max_connections, config.rx_buffer_bytes()),
      landing_(new std::byte[kLandingBytes]),
      conns_(new TcpConnection[config.max_connections]) {
  // Buffers are reserved now, not on accept, so accepting never allocates;
  // the kernel commits their pages only when a connection writes them.
  if (!memory_.mapped()) return;  // create() fails it
  for (std::uint32_t i = 0; i < config_.max_connections; ++i) {
    conns_[i].hot = memory_.hot(i);
    conns_[i].sq = memory_.sq(i);
    conns_[i].rx = memory_.rx(i);
  }
}

TcpTransport::~TcpTransport() {
  for (std::uint32_t i = 0; i < config_.max_connections; ++i) {
    if (conns_[i].fd >= 0) ::close(conns_[i].fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (timer_fd_ >= 0) ::close(timer_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

TransportCaps TcpTransport::caps() const noexcept {
  TransportCaps c;
  c.kind = TransportKind::Tcp;
  c.max_message_bytes = config_.max_message_bytes;
  c.send_queue_depth = kSendQueueDepth;
  // TCP posts no receives (the socket buffer absorbs bursts), but the channel
  // layer runs one credit protocol on both transports: 128, like rdma's
  // kRecvDepth, so tcp lanes behave (and are tested) as rdma lanes do, and a
  // peer has at most this many unprocessed messages queued at us per lane.
  c.recv_depth = 128;
  c.max_connections = config_.max_connections;
  return c;
}

Status TcpTransport::configure_socket(int fd) noexcept {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) return Status::BadRequest;
  if (config_.sndbuf_bytes != 0) {
    const int v = static_cast<int>(config_.sndbuf_bytes);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
  }
  if (config_.rcvbuf_bytes != 0) {
    const int v = static_cast<int>(config_.rcvbuf_bytes);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
  }
  return Status::Ok;
}

ConnId TcpTransport::id_of(std::uint32_t slot) const noexcept {
  return (static_cast<ConnId>(conns_[slot].generation) << 16) | (slot + 1);
}

TcpConnection* TcpTransport::lookup(ConnId conn) noexcept {
  const std::uint32_t low = conn & 0xFFFFu;
  if (low == 0 || low > config_.max_connections) return nullptr;
  TcpConnection& c = conns_[low - 1];
  if (c.state == ConnState::Free || (conn >> 16) != c.generation) return nullptr;
  return &c;
}

int TcpTransport::conn_fd(ConnId conn) const noexcept {
  const TcpConnection* c = const_cast<TcpTransport*>(this)->lookup(conn);
  return c == nullptr ? -1 : c->fd;
}

int TcpTransport::alloc_slot() noexcept {
  for (std::uint32_t i = 0; i < config_.max_connections; ++i) {
    if (conns_[i].state == ConnState::Free) return static_cast<int>(i);
  }
  return -1;
}

ConnId TcpTransport::install(int slot, int fd) noexcept {
  TcpConnection& c = conns_[slot];
  c.fd = fd;
  c.state = ConnState::Open;
  c.want_write = false;
  c.close_status = Status::Ok;
  c.sq_head = c.sq_written = c.sq_tail = 0;
  c.write_offset = 0;
  c.rx_begin = c.rx_end = 0;
  c.rx_direct = false;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = static_cast<std::uint64_t>(slot);
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    // Cannot watch it: fail it like a reset so the owner still sees Closed.
    begin_drain(static_cast<std::uint32_t>(slot), Status::PeerReset);
  }
  return id_of(static_cast<std::uint32_t>(slot));
}

void TcpTransport::set_want_write(std::uint32_t slot, bool on) noexcept {
  TcpConnection& c = conns_[slot];
  if (c.want_write == on || c.fd < 0) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0u);
  ev.data.u64 = slot;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
  c.want_write = on;
}

void TcpTransport::begin_drain(std::uint32_t slot, Status why) noexcept {
  TcpConnection& c = conns_[slot];
  if (c.state == ConnState::Connecting) {
    --connecting_;
  } else if (c.state != ConnState::Open) {
    return;
  }
  guard_.forget(slot);
  if (c.fd >= 0) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    c.fd = -1;
  }
  c.want_write = false;
  c.state = ConnState::Draining;
  c.close_status = why;
  attention_.set(slot);
}

void TcpTransport::free_slot(std::uint32_t slot) noexcept {
  TcpConnection& c = conns_[slot];
  c.state = ConnState::Free;
  ++c.generation;  // stale ConnIds stop matching
  attention_.clear(slot);
  // Every WR was reported: nobody reads the send queue now. The receive
  // buffer may hold payloads handed out in this poll: the next one.
  memory_.release_sq(slot);
  freed_.set(slot);
}

void TcpTransport::release_freed() noexcept {
  // A slot reused since it was freed has received nothing yet (only poll
  // receives, after this): giving its pages back loses nothing.
  for (std::uint32_t s = freed_.next(0); s != decltype(freed_)::kNone; s = freed_.next(s + 1)) {
    freed_.clear(s);
    memory_.release_rx(s);
  }
}

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
  c.fd = started.value;
  c.state = ConnState::Connecting;
  c.want_write = false;
  c.close_status = Status::Ok;
  c.sq_head = c.sq_written = c.sq_tail = 0;
  c.write_offset = 0;
  c.rx_begin = c.rx_end = 0;
  c.rx_direct = false;
  c.connect_deadline_ns = mono_now_ns() + std::uint64_t{config_.connect_timeout_ms} * 1'000'000;
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
    if (mono_now_ns() < c.connect_deadline_ns) return;  // its EPOLLOUT, or the deadline, comes back here
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
  const std::uint64_t now = mono_now_ns();
  for (std::uint32_t i = 0; i < config_.max_connections; ++i) {
    if (conns_[i].state == ConnState::Connecting && now >= conns_[i].connect_deadline_ns) attention_.set(i);
  }
}

std::string TcpTransport::peer_address(ConnId conn) const {
  const int fd = conn_fd(conn);
  if (fd < 0) return {};
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  char text[INET6_ADDRSTRLEN] = {};
  const void* addr = ss.ss_family == AF_INET
                         ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr)
                         : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr);
  if (::inet_ntop(ss.ss_family, addr, text, sizeof text) == nullptr) return {};
  return text;
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
  const std::uint64_t now = mono_now_ns();
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
    accept_resume_ns_ = mono_now_ns() + std::uint64_t{accept_wait_ms_} * 1'000'000;
    return;
  }
  accept_paused_ = false;
  accept_pending_ = true;  // what queued meanwhile is accepted in this poll
}

bool TcpTransport::admit(int fd, const sockaddr_storage& from, Completion& c) noexcept {
  const AcceptGuard::Source src = AcceptGuard::source_of(from);
  const std::uint64_t now = mono_now_ns();
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
  itimerspec its{};
  if (at != 0) {
    // steady_clock is CLOCK_MONOTONIC here; an absolute time needs no now().
    its.it_value.tv_sec = static_cast<time_t>(at / 1'000'000'000);
    its.it_value.tv_nsec = static_cast<long>(at % 1'000'000'000);
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
  }
  (void)timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr);  // at 0: disarmed
}

void TcpTransport::expire_silent() noexcept {
  std::uint64_t expiry = 0;
  while (::read(timer_fd_, &expiry, sizeof expiry) > 0) {
  }
  timer_due_ = false;
  if (accept_paused_ && mono_now_ns() >= accept_resume_ns_) resume_accepts();
  AttentionMask<kMaxConnections> due;
  if (guard_.expired(mono_now_ns(), due) != 0) {
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

std::uint32_t TcpTransport::connections_in_use() const noexcept {
  std::uint32_t n = 0;  // at most max_connections (1,024) slots, read once per status snapshot
  for (std::uint32_t i = 0; i < config_.max_connections; ++i) n += conns_[i].state != ConnState::Free ? 1 : 0;
  return n;
}

Status TcpTransport::close(ConnId conn) {
  owner_.check();
  TcpConnection* c = lookup(conn);
  if (c == nullptr || (c->state != ConnState::Open && c->state != ConnState::Connecting)) {
    return Status::EndpointClosed;
  }
  begin_drain((conn & 0xFFFFu) - 1, Status::Ok);  // a connect under way is abandoned
  return Status::Ok;
}

Result<MemoryHandle> TcpTransport::register_memory(void*, std::size_t) {
  // Kernel TCP copies through the socket; there is nothing to register.
  return Result<MemoryHandle>::fail(Status::NotSupported);
}

Status TcpTransport::deregister_memory(MemoryHandle) { return Status::NotSupported; }

}  // namespace ferry::transport::tcp
