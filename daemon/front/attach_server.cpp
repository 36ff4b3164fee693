#include "daemon/front/attach_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/config/config_keys.h"
#include "daemon/front/attach_socket.h"
#include "shm/doorbell.h"
#include "shm/segment.h"

namespace ferry::daemon {

namespace {

std::string clean_name(const char (&raw)[shm::kClientNameBytes]) {
  std::string name;
  for (char c : raw) {
    if (c == '\0') break;
    name.push_back(c >= 0x20 && c < 0x7f ? c : '?');  // it goes into logs and JSON
  }
  return name;
}

}  // namespace

template <typename... Args>
void AttachServer::log_refusal(Refusal kind, fmt::format_string<Args...> format, Args&&... args) const {
  std::uint64_t skipped = 0;
  if (!refusal_logs_[static_cast<std::size_t>(kind)].allow(skipped)) return;
  std::string line = fmt::format(format, std::forward<Args>(args)...);
  if (skipped != 0)
    line += fmt::format(" ({} more attach{} refused so since the last such line)", skipped, skipped == 1 ? "" : "es");
  spdlog::warn("{}", line);
}

AttachServer::AttachServer(asio::io_context& io, const Config& config, EngineSet& engines, std::uint64_t epoch)
    : io_(io), config_(config), engines_(engines), epoch_(epoch), listener_(io), retry_timer_(io), backoff_timer_(io) {
  for (std::uint32_t e = 0; e < engines.size(); ++e) {
    engine_events_.push_back(std::make_unique<asio::posix::stream_descriptor>(io));
  }
}

AttachServer::~AttachServer() { stop(); }

void AttachServer::start(int listen_fd) {
  listener_.assign(listen_fd);
  for (std::uint32_t e = 0; e < engines_.size(); ++e) {
    engine_events_[e]->assign(engines_.engine(e).event_fd());
    watch_engine_events(e);
  }
  accept_next();
}

void AttachServer::stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ec;
  listener_.close(ec);
  for (auto& ev : engine_events_) ev->release();  // the engines own those fds
  retry_timer_.cancel();
  backoff_timer_.cancel();
  for (const auto& c : handshaking_) c->sock.close(ec);
  for (const auto& [id, c] : conns_) {
    c->timer.cancel();
    c->sock.close(ec);
  }
  handshaking_.clear();
  conns_.clear();
}

std::vector<std::shared_ptr<const ClientInfo>> AttachServer::clients() const {
  std::vector<std::shared_ptr<const ClientInfo>> out;
  out.reserve(conns_.size());
  for (const auto& [id, c] : conns_) out.push_back(c->info);
  return out;
}

void AttachServer::accept_next() {
  if (stopped_ || accept_armed_ || backing_off_ || handshaking_.size() >= kMaxHandshakes) return;
  accept_armed_ = true;
  listener_.async_wait(asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
    accept_armed_ = false;
    if (ec || stopped_) return;
    on_accept_ready();
    accept_next();
  });
}

void AttachServer::on_accept_ready() {
  while (handshaking_.size() < kMaxHandshakes) {
    int fd = ::accept4(listener_.native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (AcceptBackoff::is_resource_error(err)) {
        backing_off_ = true;
        backoff_timer_.expires_after(backoff_.on_failure(err));
        backoff_timer_.async_wait([this](const boost::system::error_code& ec) {
          backing_off_ = false;
          if (!ec) accept_next();
        });
      } else if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR && err != ECONNABORTED) {
        spdlog::warn("attach accept: {}", std::strerror(err));
      }
      return;
    }
    backoff_.on_success();
    auto conn = std::make_shared<Conn>(io_, fd);
    handshaking_.insert(conn);
    // A client that connects and says nothing must not hold a slot forever.
    conn->timer.expires_after(std::chrono::milliseconds(kHandshakeTimeoutMs));
    conn->timer.async_wait([this, conn](const boost::system::error_code& ec) {
      if (ec || !handshaking_.count(conn)) return;
      log_refusal(Refusal::Request, "attach: no request within {} ms; closing", kHandshakeTimeoutMs);
      close_conn(conn);
    });
    conn->sock.async_wait(asio::posix::stream_descriptor::wait_read, [this, conn](const boost::system::error_code& ec) {
      if (ec || stopped_) return;
      on_handshake(conn);
    });
  }
}

void AttachServer::on_handshake(const ConnPtr& conn) {
  conn->timer.cancel();
  const int fd = conn->sock.native_handle();
  shm::AttachRequest req{};
  const Result<std::size_t> got = recv_message(fd, &req, sizeof(req));
  if (got.status == Status::Busy) {  // spurious wake-up
    conn->sock.async_wait(asio::posix::stream_descriptor::wait_read, [this, conn](const boost::system::error_code& ec) {
      if (!ec && !stopped_) on_handshake(conn);
    });
    return;
  }
  handshaking_.erase(conn);
  accept_next();  // a handshake place is free again
  if (!got || got.value == 0) {
    close_conn(conn);
    return;
  }
  ClientSession* session = nullptr;
  Status status = got.value == sizeof(req) ? attach(conn, req, &session) : Status::BadRequest;

  shm::AttachReply reply{};
  reply.magic = shm::kAttachMagic;
  reply.abi_version = shm::kAbiVersion;
  reply.status = static_cast<std::uint8_t>(status);
  reply.daemon_epoch = epoch_;
  if (status != Status::Ok) {
    if (got.value != sizeof(req))
      log_refusal(Refusal::Request, "attach refused BadRequest: a request of {} bytes (want {})", got.value,
                  sizeof(req));
    // The refusal is a courtesy: the connection is closed whether or not
    // the client is still there to read it.
    (void)send_message(fd, &reply, sizeof(reply), nullptr, 0);
    close_conn(conn);
    return;
  }
  reply.client_id = conn->id;
  reply.engine = conn->engine;
  reply.segment_bytes = session->view().layout.segment_bytes;
  const int fds[shm::kAttachFdCount] = {session->segment_fd(), session->sq_bell.fd(), session->cq_bell.peer_fd()};
  if (const Error sent = send_message(fd, &reply, sizeof(reply), fds, shm::kAttachFdCount); sent.failed()) {
    spdlog::warn("client {}: attach reply failed ({}); dropping it", conn->id, sent.message());
    delete session;
    close_conn(conn);
    return;
  }
  // The engine has never seen this session; hand it over only now that the
  // client holds its fds.
  if (!engines_.engine(conn->engine).submit(EngineCommand{EngineCommand::Kind::Attach, session, 0})) {
    spdlog::error("client {}: engine {} queue full; dropping it", conn->id, conn->engine);
    delete session;
    close_conn(conn);
    return;
  }
  engines_.placed(conn->engine);
  const ClientInfo& info = *conn->info;
  spdlog::info("client {} attached: name '{}' pid {} uid {} gid {} engine {} tx {} rx {} sq {} cq {}", info.id,
               info.name, info.pid, info.uid, info.gid, conn->engine, info.tx_bytes, info.rx_bytes,
               session->sq.capacity(), session->cq.capacity());
  conns_.emplace(conn->id, conn);
  watch(conn);
}

Status AttachServer::attach(const ConnPtr& conn, const shm::AttachRequest& req, ClientSession** out) {
  PeerCred cred;
  if (const Error got = peer_cred(conn->sock.native_handle(), &cred); got.failed()) {
    log_refusal(Refusal::Request, "attach refused PermissionDenied: the connection's credentials cannot be read ({})",
                got.message());
    return Status::PermissionDenied;
  }
  auto info = std::make_shared<ClientInfo>();
  info->pid = cred.pid;
  info->uid = cred.uid;
  info->gid = cred.gid;
  info->name = clean_name(req.name);
  conn->info = info;

  if (req.magic != shm::kAttachMagic || req.abi_version != shm::kAbiVersion) {
    log_refusal(Refusal::Request,
                "attach of '{}' (pid {} uid {}) refused VersionMismatch: ABI version {} (we speak {})", info->name,
                info->pid, info->uid, req.abi_version, shm::kAbiVersion);
    return Status::VersionMismatch;
  }
  if (req.reserved != 0) {
    log_refusal(Refusal::Request, "attach of '{}' (pid {} uid {}) refused BadRequest: reserved field set", info->name,
                info->pid, info->uid);
    return Status::BadRequest;
  }
  const std::optional<std::uint32_t> engine = engines_.place(req.engine);
  if (!engine) {
    log_refusal(Refusal::Request,
                "attach of '{}' (pid {} uid {}): it asked for engine {} (FERRY_ENGINE); ferryd runs engines 0..{}",
                info->name, info->pid, info->uid, req.engine - 1, engines_.size() - 1);
    return Status::BadRequest;
  }
  conn->engine = *engine;
  info->engine = *engine;
  if (conns_.size() >= config_.max_clients || draining_) {
    log_refusal(Refusal::Busy, "attach of '{}' (pid {} uid {}) refused Busy: {}", info->name, info->pid, info->uid,
                draining_ ? "the daemon is draining" : fmt::format("max-clients {} reached", config_.max_clients));
    return Status::Busy;
  }
  shm::SegmentSizes sizes{
      req.sizes.sq_entries != 0 ? req.sizes.sq_entries : config_.sq_entries,
      req.sizes.cq_entries != 0 ? req.sizes.cq_entries : config_.cq_entries,
      req.sizes.tx_bytes != 0 ? req.sizes.tx_bytes : config_.tx_arena_bytes,
      req.sizes.rx_bytes != 0 ? req.sizes.rx_bytes : config_.rx_arena_bytes,
  };
  if (sizes.tx_bytes > config_.max_tx_arena_bytes || sizes.rx_bytes > config_.max_rx_arena_bytes) {
    log_refusal(Refusal::Sizes,
                "attach of '{}' (pid {} uid {}) refused NoMemory: arenas of {} + {} bytes (max-tx-arena-bytes {}, "
                "max-rx-arena-bytes {})",
                info->name, info->pid, info->uid, sizes.tx_bytes, sizes.rx_bytes,
                format_size(config_.max_tx_arena_bytes), format_size(config_.max_rx_arena_bytes));
    return Status::NoMemory;
  }
  if (!shm::valid_sizes(sizes)) {
    log_refusal(Refusal::Sizes, "attach of '{}' (pid {} uid {}) refused BadRequest: invalid ring or arena sizes",
                info->name, info->pid, info->uid);
    return Status::BadRequest;
  }
  const std::uint64_t segment_bytes = shm::compute_layout(sizes).segment_bytes;
  if (const Status q = check_quotas(*info, segment_bytes); q != Status::Ok) return q;

  std::uint32_t id = next_id_++;
  while (id == 0 || conns_.count(id) != 0) id = next_id_++;
  auto seg = shm::create_segment(sizes, id, epoch_, config_.max_message_bytes);
  if (!seg) {
    log_refusal(Refusal::Resources, "attach of '{}' (pid {} uid {}) refused {}: cannot create its segment", info->name,
                info->pid, info->uid, to_string(seg.status));
    return seg.status;
  }
  auto sq_bell = shm::Doorbell::create();
  auto cq_bell = shm::Doorbell::create_ringer_pipe();  // the daemon's end of its own: ring() never blocks
  if (!sq_bell || !cq_bell) {
    log_refusal(Refusal::Resources, "attach of '{}' (pid {} uid {}) refused NoMemory: cannot create its doorbells",
                info->name, info->pid, info->uid);
    return Status::NoMemory;
  }
  // rdma lanes: the arenas are registered once, here, so remote traffic
  // leaves from and lands in them without per-message registration (only
  // the tx arena is reachable by peers: segment_mr.h).
  SegmentMr mr;
  const Engine& home = engines_.engine(conn->engine);
  if (home.rdma_pd() != nullptr) {
    const auto& lay = seg.value.view.layout;
    std::byte* base = static_cast<std::byte*>(seg.value.view.base);
    const Error bad = SegmentMr::make(home.rdma_pds(), base + lay.tx_offset, lay.tx_bytes, base + lay.rx_offset,
                                      lay.rx_bytes, home.per_call_keys(), &mr);
    if (bad.failed()) {
      log_refusal(Refusal::Resources,
                  "attach of '{}' (pid {}): cannot register its {} byte segment with the rdma device ({}); refused "
                  "with {}",
                  info->name, info->pid, seg.value.view.layout.segment_bytes, bad.message(), to_string(bad.status()));
      return bad.status();
    }
  }
  info->id = id;
  info->tx_bytes = seg.value.view.layout.tx_bytes;
  info->rx_bytes = seg.value.view.layout.rx_bytes;
  info->attached_at = std::chrono::steady_clock::now();
  conn->id = id;
  conn->segment_bytes = segment_bytes;
  *out = new ClientSession(info, std::move(seg.value), std::move(sq_bell.value), std::move(cq_bell.value),
                           config_.max_message_bytes);
  (*out)->mr = std::move(mr);
  (*out)->max_endpoints = config_.max_endpoints_per_client;
  return Status::Ok;
}

Status AttachServer::check_quotas(const ClientInfo& who, std::uint64_t segment_bytes) const {
  std::uint32_t uid_clients = 0;
  std::uint64_t uid_bytes = 0, all_bytes = 0;
  for (const auto& [id, c] : conns_) {
    all_bytes += c->segment_bytes;
    if (c->info->uid != who.uid) continue;
    ++uid_clients;
    uid_bytes += c->segment_bytes;
  }
  if (uid_clients >= config_.max_clients_per_uid) {
    log_refusal(Refusal::UidClients,
                "attach of '{}' (pid {} uid {}) refused Busy: uid {} has {} clients attached (max-clients-per-uid {})",
                who.name, who.pid, who.uid, who.uid, uid_clients, config_.max_clients_per_uid);
    return Status::Busy;
  }
  if (uid_bytes + segment_bytes > config_.max_memory_bytes_per_uid) {
    log_refusal(Refusal::UidMemory,
                "attach of '{}' (pid {} uid {}) refused NoMemory: its {} byte segment would bring uid {} to {} bytes "
                "(max-memory-bytes-per-uid {})",
                who.name, who.pid, who.uid, segment_bytes, who.uid, uid_bytes + segment_bytes,
                format_size(config_.max_memory_bytes_per_uid));
    return Status::NoMemory;
  }
  if (all_bytes + segment_bytes > config_.max_memory_bytes) {
    log_refusal(
        Refusal::Memory,
        "attach of '{}' (pid {} uid {}) refused NoMemory: its {} byte segment would bring all clients to {} bytes "
        "(max-memory-bytes {})",
        who.name, who.pid, who.uid, segment_bytes, all_bytes + segment_bytes, format_size(config_.max_memory_bytes));
    return Status::NoMemory;
  }
  return Status::Ok;
}

void AttachServer::watch(const ConnPtr& conn) {
  conn->sock.async_wait(asio::posix::stream_descriptor::wait_read, [this, conn](const boost::system::error_code& ec) {
    if (stopped_ || !conns_.count(conn->id) || conns_[conn->id] != conn) return;
    if (ec) {
      hang_up(conn);
      return;
    }
    char buf[64];
    const Result<std::size_t> got = recv_message(conn->sock.native_handle(), buf, sizeof(buf));
    if (got.status != Status::Busy && (!got || got.value == 0)) {
      hang_up(conn);
      return;
    }
    if (got && got.value > 0)
      spdlog::debug("client {}: ignoring {} unexpected bytes on its attach socket", conn->id, got.value);
    watch(conn);
  });
}

void AttachServer::hang_up(const ConnPtr& conn) {
  spdlog::debug("client {} hung up", conn->id);
  conns_.erase(conn->id);
  close_conn(conn);
  engines_.left(conn->engine);
  send_engine(conn->engine, EngineCommand{EngineCommand::Kind::Detach, nullptr, conn->id});
}

void AttachServer::close_conn(const ConnPtr& conn) {
  boost::system::error_code ec;
  conn->timer.cancel();
  conn->sock.close(ec);
  if (handshaking_.erase(conn) != 0) accept_next();
}

void AttachServer::send_engine(std::uint32_t engine, const EngineCommand& cmd) {
  if (unsent_.empty() && engines_.engine(engine).submit(cmd)) return;
  unsent_.emplace_back(engine, cmd);
  if (unsent_.size() > 1) return;  // timer already armed
  retry_timer_.expires_after(std::chrono::milliseconds(1));
  retry_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    std::vector<std::pair<std::uint32_t, EngineCommand>> pending;
    pending.swap(unsent_);
    for (const auto& [e, c] : pending) send_engine(e, c);
  });
}

void AttachServer::watch_engine_events(std::uint32_t e) {
  engine_events_[e]->async_wait(asio::posix::stream_descriptor::wait_read,
                                [this, e](const boost::system::error_code& ec) {
                                  if (ec || stopped_) return;
                                  Engine& engine = engines_.engine(e);
                                  std::uint64_t v;
                                  [[maybe_unused]] auto r = ::read(engine.event_fd(), &v, sizeof(v));
                                  while (auto id = engine.pop_event()) {
                                    auto it = conns_.find(*id);
                                    if (it == conns_.end()) continue;
                                    ConnPtr conn = it->second;
                                    conns_.erase(it);
                                    engines_.left(conn->engine);
                                    close_conn(conn);  // the engine already detached it
                                  }
                                  watch_engine_events(e);
                                });
}

}  // namespace ferry::daemon
