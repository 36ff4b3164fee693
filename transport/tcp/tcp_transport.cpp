// TcpTransport's core: construction, the connection slot table, close.
// Dialling is in tcp_dial.cpp, the listener in tcp_listen.cpp, the
// datapath in tcp_transport_datapath.cpp. Not on the datapath: may allocate.
#include "transport/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <string>

namespace ferry::transport::tcp {
namespace {

AcceptGuardConfig guard_config(const TcpConfig& c) noexcept {
  AcceptGuardConfig g;
  g.max_connections = c.max_connections;
  g.reserve = c.reserved_slots;
  g.per_source = c.max_unvouched_per_source;
  g.hello_timeout_ms = c.hello_timeout_ms;
  return g;
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
  c.start(fd, ConnState::Open);
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
