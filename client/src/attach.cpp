// Attaching to ferryd: connect the SOCK_SEQPACKET client socket, send one
// AttachRequest, receive the AttachReply with the segment memfd and the two
// doorbell eventfds (SCM_RIGHTS), check the reply and the segment ABI, map
// it, and build the client's private state. The socket then stays open: its
// hang-up is how each side learns the other is gone.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "client/src/client_impl.h"
#include "shm/attach_protocol.h"

namespace ferry {

std::string default_socket_path() {
  const char* env = std::getenv("FERRY_SOCKET");
  if (env != nullptr && *env != '\0') return env;
  return "/run/ferry/ferryd.sock";
}

namespace {

// Owns an fd until released; keeps every early return leak free.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) noexcept : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int release() noexcept { return std::exchange(fd, -1); }
};

Status connect_socket(const std::string& path, Fd& out) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) return Status::BadRequest;
  std::memcpy(addr.sun_path, path.data(), path.size());
  out.fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (out.fd < 0) return Status::NoMemory;
  int rc;
  do {
    rc = ::connect(out.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    if (errno == EACCES || errno == EPERM) return Status::PermissionDenied;
    return Status::DaemonGone;  // ENOENT, ECONNREFUSED: no daemon listening there
  }
  // A daemon that accepts but never answers must not hang attach forever.
  timeval tv{10, 0};
  ::setsockopt(out.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(out.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return Status::Ok;
}

// AttachRequest::engine: index + 1 of the engine asked for, 0 for any.
// FERRY_ENGINE applies when the options name none; a value that is not a
// number is ignored (the daemon chooses).
std::uint32_t requested_engine(const AttachOptions& o) {
  if (o.engine >= 0) return static_cast<std::uint32_t>(o.engine) + 1;
  const char* env = std::getenv("FERRY_ENGINE");
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  const unsigned long v = std::strtoul(env, &end, 10);
  if (end == env || *end != '\0' || v >= 0xFFFF) return 0;
  return static_cast<std::uint32_t>(v) + 1;
}

Status send_request(int fd, const AttachOptions& o) {
  shm::AttachRequest req{};
  req.magic = shm::kAttachMagic;
  req.abi_version = shm::kAbiVersion;
  req.pid = static_cast<std::uint32_t>(::getpid());
  req.sizes = {o.sq_entries, o.cq_entries, o.tx_bytes, o.rx_bytes};
  std::memcpy(req.name, o.name.data(), std::min(o.name.size(), shm::kClientNameBytes - 1));
  req.engine = requested_engine(o);
  ssize_t n;
  do {
    n = ::send(fd, &req, sizeof req, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof req) ? Status::Ok : Status::DaemonGone;
}

// Receives the reply and up to kAttachFdCount fds. Any fd received is owned
// by `fds` even when the reply is then rejected.
Status recv_reply(int fd, shm::AttachReply& reply, Fd (&fds)[shm::kAttachFdCount]) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * shm::kAttachFdCount)];
  iovec iov{&reply, sizeof reply};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  std::size_t got = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int f;
      std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
      if (got < shm::kAttachFdCount) {
        fds[got++].fd = f;
      } else {
        ::close(f);
      }
    }
  }
  if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? Status::Timeout : Status::DaemonGone;
  if (n == 0) return Status::DaemonGone;
  if (n != static_cast<ssize_t>(sizeof reply) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    return Status::ProtocolError;
  }
  if (reply.magic != shm::kAttachMagic) return Status::ProtocolError;
  if (reply.abi_version != shm::kAbiVersion) return Status::VersionMismatch;
  if (reply.status > kMaxStatus) return Status::ProtocolError;
  if (reply.status != static_cast<std::uint8_t>(Status::Ok)) return static_cast<Status>(reply.status);
  if (got != shm::kAttachFdCount) return Status::ProtocolError;
  return Status::Ok;
}

// Every op in flight needs a slot; size generously but bounded.
std::uint32_t inflight_slots_for(const shm::SegmentView& v) {
  const std::uint64_t by_tx = v.layout.tx_bytes / 4096;
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(by_tx, 4ull * v.sq_capacity, 65536));
}

}  // namespace

Client::Impl::Impl(int socket_fd, shm::MappedSegment segment, shm::Doorbell sq_bell, shm::Doorbell cq_bell,
                   std::uint32_t inflight_slots, std::uint32_t release_slots, std::uint32_t stash_slots)
    : socket_fd_(socket_fd),
      seg_(std::move(segment)),
      sq_bell_(std::move(sq_bell)),
      cq_bell_(std::move(cq_bell)),
      sq_(seg_.view.sq_header, seg_.view.sq_entries, seg_.view.sq_capacity),
      cq_(seg_.view.cq_header, seg_.view.cq_entries, seg_.view.cq_capacity),
      tx_(seg_.view.layout.tx_offset, seg_.view.layout.tx_bytes),
      tx_offset_(seg_.view.layout.tx_offset),
      tx_bytes_(seg_.view.layout.tx_bytes),
      rx_offset_(seg_.view.layout.rx_offset),
      rx_bytes_(seg_.view.layout.rx_bytes),
      max_message_(seg_.view.header->max_message_bytes),
      client_id_(seg_.view.header->client_id),
      epoch_(seg_.view.header->daemon_epoch),
      inflight_(inflight_slots),
      releases_(release_slots),
      stash_(stash_slots),
      inline_(shm::inline_window(seg_.view.cq_capacity)) {
  // A slab is the largest block, so no message can exceed it whatever the header says.
  if (max_message_ == 0 || max_message_ > shm::kSlabBytes) max_message_ = shm::kSlabBytes;
}

Client::Impl::~Impl() {
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (socket_fd_ >= 0) ::close(socket_fd_);  // the daemon frees everything we held
}

bool Client::Impl::init_events() noexcept {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = cq_bell_.fd();
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, cq_bell_.fd(), &ev) != 0) return false;
  ev.events = EPOLLRDHUP | EPOLLHUP | EPOLLERR;
  ev.data.fd = socket_fd_;
  return ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, socket_fd_, &ev) == 0;
}

Result<std::unique_ptr<Client>> Client::attach(const AttachOptions& options) {
  using R = Result<std::unique_ptr<Client>>;
  client_detail::watch_forks();  // before the Impl reads the generation
  const std::string path = options.socket_path.empty() ? default_socket_path() : options.socket_path;
  Fd sock;
  if (Status s = connect_socket(path, sock); s != Status::Ok) return R::fail(s);
  if (Status s = send_request(sock.fd, options); s != Status::Ok) return R::fail(s);
  shm::AttachReply reply{};
  Fd fds[shm::kAttachFdCount];
  if (Status s = recv_reply(sock.fd, reply, fds); s != Status::Ok) return R::fail(s);

  auto mapped = shm::map_segment(fds[0].release());
  if (!mapped) return R::fail(mapped.status);
  const shm::SegmentView& v = mapped.value.view;
  if (v.header->client_id != reply.client_id || v.header->daemon_epoch != reply.daemon_epoch) {
    return R::fail(Status::ProtocolError);
  }
  // Worst case every rx block is a 64 B delivery waiting to be released.
  const auto release_slots =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(v.layout.rx_bytes / shm::kMinBlockBytes, 1u << 22));
  const std::uint32_t slots = inflight_slots_for(v);
  const std::uint32_t stash = slots + 4 * v.cq_capacity;

  // Timeouts were for the handshake only; afterwards the socket is only watched for hang-up.
  timeval zero{0, 0};
  ::setsockopt(sock.fd, SOL_SOCKET, SO_RCVTIMEO, &zero, sizeof zero);
  auto impl = std::make_unique<Impl>(sock.release(), std::move(mapped.value), shm::Doorbell(fds[1].release()),
                                     shm::Doorbell(fds[2].release()), slots, release_slots, stash);
  if (!impl->init_events()) return R::fail(Status::NoMemory);
  impl->set_busy_poll(options.busy_poll);
  impl->engine_ = reply.engine;
  impl->log_ = client_detail::Log(options.log, options.log_level);
  impl->log_.say(LogLevel::Debug, "attached to %s as client %u on engine %u", path.c_str(), reply.client_id,
                 reply.engine);
  return R::ok(std::unique_ptr<Client>(new Client(std::move(impl))));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

}  // namespace ferry
