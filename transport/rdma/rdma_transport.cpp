// RdmaTransport setup: construction, listen, close, memory registration,
// rdma_cm event handling and the connection slot table. Not on the
// datapath: may allocate and log.
#include "transport/rdma/rdma_transport.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "transport/rdma/device.h"

namespace ferry::transport::rdma {
namespace {

constexpr std::uint64_t kCqTag = 0;
constexpr std::uint64_t kCmTag = 1;
constexpr std::uint64_t kAsyncTag = 2;
constexpr int kListenBacklog = 128;

bool set_nonblocking(int fd) {
  const int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

}  // namespace

Result<std::unique_ptr<RdmaTransport>> RdmaTransport::create(const RdmaConfig& config) {
  using R = Result<std::unique_ptr<RdmaTransport>>;
  if (config.validate() != Status::Ok) return R::fail(Status::BadRequest);
  auto fault = rdma_fault_from_env();  // test-only switch; logs when set
  if (!fault) return R::fail(fault.status);
  std::unique_ptr<RdmaTransport> t(new RdmaTransport(config));
  t->fault_ = fault.value;
  const Status s = t->init();
  if (s != Status::Ok) return R::fail(s);
  return R::ok(std::move(t));
}

RdmaTransport::RdmaTransport(const RdmaConfig& config) : config_(config), conns_(new RdmaConnection[kMaxConnections]) {}

Status RdmaTransport::init() {
  auto dev = pick_device(config_);
  if (!dev) return dev.status;
  ctx_ = dev.value.ctx;

  if (!config_.address.empty() || config_.gid_index >= 0) {
    auto g = select_gid("/sys", dev.value.name, 1, config_.address, config_.gid_index);
    if (g) {
      gid_ = std::move(g.value);
    } else if (config_.gid_index >= 0) {
      return Status::BadRequest;
    } else {
      // Not fatal: rdma_cm resolves the source GID from the route itself;
      // the table scan only names it for the log and checks it.
      spdlog::warn("rdma: {}: no GID chosen from the table; rdma_cm picks one per route", dev.value.name);
    }
  }

  pd_ = ibv_alloc_pd(ctx_);
  comp_channel_ = ibv_create_comp_channel(ctx_);
  cm_channel_ = rdma_create_event_channel();
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (pd_ == nullptr || comp_channel_ == nullptr || cm_channel_ == nullptr || epoll_fd_ < 0) {
    spdlog::error("rdma: cannot create PD/completion channel/cm channel: {}", std::strerror(errno));
    return Status::NoMemory;
  }
  const int cqe = static_cast<int>(config_.max_connections * (kSendQueueDepth + kRecvDepth));
  cq_ = ibv_create_cq(ctx_, cqe, nullptr, comp_channel_, 0);
  if (cq_ == nullptr) {
    spdlog::error("rdma: ibv_create_cq({}) failed: {}", cqe, std::strerror(errno));
    return Status::NoMemory;
  }
  if (!set_nonblocking(comp_channel_->fd) || !set_nonblocking(cm_channel_->fd) || !set_nonblocking(ctx_->async_fd))
    return Status::NoMemory;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kCqTag;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, comp_channel_->fd, &ev) != 0) return Status::NoMemory;
  ev.data.u64 = kCmTag;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, cm_channel_->fd, &ev) != 0) return Status::NoMemory;
  ev.data.u64 = kAsyncTag;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ctx_->async_fd, &ev) != 0) return Status::NoMemory;
  if (ibv_req_notify_cq(cq_, 0) != 0) return Status::NoMemory;
  cq_armed_ = true;

  const std::size_t slot = config_.slot_bytes();
  Status s = recv_slab_.init(pd_, std::size_t{config_.max_connections} * kRecvDepth * slot);
  if (s == Status::Ok) s = send_slab_.init(pd_, std::size_t{config_.max_connections} * kSendQueueDepth * slot);
  if (s != Status::Ok) return s;
  spdlog::info(
      "rdma: {} ready: {} connections, eager {} B, slabs 2 x {} KiB, ack_timeout {}, retry_cnt {}, rnr_retry 0",
      dev.value.name, config_.max_connections, config_.max_eager_bytes, recv_slab_.size() / 1024, config_.ack_timeout,
      config_.retry_cnt);
  return Status::Ok;
}

RdmaTransport::~RdmaTransport() {
  for (std::uint32_t i = 0; i < kMaxConnections; ++i) {
    RdmaConnection& c = conns_[i];
    if (c.qp != nullptr) ibv_destroy_qp(c.qp);
    if (c.id != nullptr) rdma_destroy_id(c.id);
  }
  for (rdma_cm_id* id : parked_ids_) rdma_destroy_id(id);
  if (listen_id_ != nullptr) rdma_destroy_id(listen_id_);
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (comp_channel_ != nullptr) ibv_destroy_comp_channel(comp_channel_);
  for (auto& [id, mr] : mrs_) ibv_dereg_mr(mr);
  recv_slab_.reset();
  send_slab_.reset();
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (cm_channel_ != nullptr) rdma_destroy_event_channel(cm_channel_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

TransportCaps RdmaTransport::caps() const noexcept {
  TransportCaps c;
  c.kind = TransportKind::Rdma;
  c.memory_registration = true;
  c.rdma_write = c.rdma_write_imm = c.rdma_read = true;
  c.max_message_bytes = config_.max_eager_bytes;
  c.send_queue_depth = kSendQueueDepth;
  c.recv_depth = kRecvDepth;
  c.max_connections = config_.max_connections;
  return c;
}

const char* RdmaTransport::device_name() const noexcept {
  return ctx_ == nullptr ? "" : ibv_get_device_name(ctx_->device);
}

ConnId RdmaTransport::id_of(std::uint32_t slot) const noexcept {
  return (static_cast<ConnId>(conns_[slot].generation) << 16) | (slot + 1);
}

RdmaConnection* RdmaTransport::lookup(ConnId conn) noexcept {
  const std::uint32_t low = conn & 0xFFFFu;
  if (low == 0 || low > config_.max_connections) return nullptr;
  RdmaConnection& c = conns_[low - 1];
  if (c.state == ConnState::Free || (conn >> 16) != c.generation) return nullptr;
  return &c;
}

ibv_qp* RdmaTransport::conn_qp(ConnId conn) noexcept {
  RdmaConnection* c = lookup(conn);
  return c == nullptr || c->state != ConnState::Open ? nullptr : c->qp;
}

int RdmaTransport::alloc_slot() noexcept {
  for (std::uint32_t i = 0; i < config_.max_connections; ++i) {
    if (conns_[i].state == ConnState::Free && conns_[i].id == nullptr) return static_cast<int>(i);
  }
  return -1;
}

Result<std::uint16_t> RdmaTransport::listen(std::string_view host, std::uint16_t port) {
  owner_.check();
  if (listen_id_ != nullptr) return Result<std::uint16_t>::fail(Status::Busy);
  sockaddr_storage ss;
  if (!parse_sockaddr(host, port, ss)) return Result<std::uint16_t>::fail(Status::BadRequest);
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(cm_channel_, &id, nullptr, RDMA_PS_TCP) != 0) return Result<std::uint16_t>::fail(Status::NoMemory);
  if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&ss)) != 0) {
    const int err = errno;
    rdma_destroy_id(id);
    spdlog::error("rdma: cannot bind {}:{}: {}", host, port, std::strerror(err));
    return Result<std::uint16_t>::fail(err == EADDRINUSE ? Status::Busy : Status::BadRequest);
  }
  if (id->verbs != nullptr && id->verbs != ctx_) {
    spdlog::error("rdma: {} belongs to device {}, not {}", host, ibv_get_device_name(id->verbs->device), device_name());
    rdma_destroy_id(id);
    return Result<std::uint16_t>::fail(Status::BadRequest);
  }
  if (rdma_listen(id, kListenBacklog) != 0) {
    spdlog::error("rdma: rdma_listen on {}:{}: {}", host, port, std::strerror(errno));
    rdma_destroy_id(id);
    return Result<std::uint16_t>::fail(Status::BadRequest);
  }
  listen_id_ = id;
  const std::uint16_t bound = ntohs(rdma_get_src_port(id));
  spdlog::info("rdma: {} listening on {}:{}", device_name(), host, bound);
  return Result<std::uint16_t>::ok(bound);
}

Status RdmaTransport::close(ConnId conn) {
  owner_.check();
  RdmaConnection* c = lookup(conn);
  if (c != nullptr && c->state == ConnState::Connecting) {
    connect_failed((conn & 0xFFFFu) - 1, "closed by its owner", Status::Ok);  // abandoned: a quiet Closed
    return Status::Ok;
  }
  if (c == nullptr || c->state != ConnState::Open) return Status::EndpointClosed;
  begin_drain((conn & 0xFFFFu) - 1, Status::Cancelled, Status::Ok);
  return Status::Ok;
}

void RdmaTransport::begin_drain(std::uint32_t slot, Status wr_status, Status closed_status) noexcept {
  RdmaConnection& c = conns_[slot];
  if (c.state != ConnState::Open && c.state != ConnState::Accepting) return;
  // Tear the QP down at once: after ibv_destroy_qp the NIC touches none of
  // the WRs' buffers, so every pending WR can be reported now; CQEs of the
  // old QP still in the CQ are dropped (state is no longer Open).
  // The QP is ferry's own (never attached to the cm id), so the order of the
  // two teardowns does not matter; with the port down the id waits instead
  // of disconnecting (rdma_device_events.cpp).
  if (c.qp != nullptr) ibv_destroy_qp(c.qp);
  retire_id(c.id, true);
  c.qp = nullptr;
  c.id = nullptr;
  if (c.state == ConnState::Accepting) {
    // The owner never heard of it: no Closed either.
    --accepting_;
    free_slot(slot);
    return;
  }
  c.state = ConnState::Draining;
  c.wr_status = wr_status;
  c.closed_status = closed_status;
  attention_ |= 1ull << slot;
}

void RdmaTransport::free_slot(std::uint32_t slot) noexcept {
  RdmaConnection& c = conns_[slot];
  c.state = ConnState::Free;
  c.report_accepted = false;
  if (++c.generation == 0) c.generation = 1;  // ConnId 0 stays invalid; stale ids stop matching
  attention_ &= ~(1ull << slot);
}

void RdmaTransport::handle_cm_events() noexcept {
  rdma_cm_event* ev = nullptr;
  while (rdma_get_cm_event(cm_channel_, &ev) == 0) {
    // Copy what is needed and ack first: rdma_destroy_id waits for the acks
    // of its id's events, and the handlers below may destroy it.
    const rdma_cm_event_type type = ev->event;
    rdma_cm_id* id = ev->id;
    const int status = ev->status;
    rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      on_connect_request(id);
      continue;
    }
    const auto slot = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(id->context));
    if (id == listen_id_ || slot >= config_.max_connections || conns_[slot].id != id) continue;
    RdmaConnection& c = conns_[slot];
    if (c.state == ConnState::Connecting) {
      on_connect_event(slot, type, status);
      continue;
    }
    switch (type) {
      case RDMA_CM_EVENT_ESTABLISHED:
        if (c.state == ConnState::Accepting) {
          --accepting_;
          c.state = ConnState::Open;
          c.report_accepted = true;
          attention_ |= 1ull << slot;
        }
        break;
      case RDMA_CM_EVENT_DISCONNECTED:
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
      case RDMA_CM_EVENT_REJECTED:
      case RDMA_CM_EVENT_UNREACHABLE:
      case RDMA_CM_EVENT_CONNECT_ERROR:
        spdlog::debug("rdma: connection {} {} (status {})", slot, rdma_event_str(type), status);
        begin_drain(slot, Status::PeerReset, Status::PeerReset);
        break;
      default: break;
    }
  }
}

void RdmaTransport::on_connect_request(rdma_cm_id* id) noexcept {
  if (id->verbs != ctx_) {
    spdlog::warn("rdma: connect request on another device; rejected");
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    return;
  }
  const int slot = alloc_slot();
  if (slot < 0) {
    spdlog::warn("rdma: connect request refused: all {} connections in use", config_.max_connections);
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    return;
  }
  const auto s = static_cast<std::uint32_t>(slot);
  rdma_conn_param p;
  if (setup_qp(s, id, true) != Status::Ok) {
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    return;
  }
  conn_param(p, conns_[s].qp->qp_num);
  conns_[s].state = ConnState::Accepting;
  ++accepting_;
  if (rdma_accept(id, &p) != 0) {
    spdlog::warn("rdma: rdma_accept failed: {}", std::strerror(errno));
    begin_drain(s, Status::PeerReset, Status::PeerReset);
  }
}

Result<MemoryHandle> RdmaTransport::register_memory(void* addr, std::size_t len) {
  owner_.check();
  auto mr = register_region(pd_, addr, len);
  if (!mr) return Result<MemoryHandle>::fail(mr.status);
  const std::uint64_t id = next_mr_id_++;
  mrs_.emplace_back(id, mr.value);
  return Result<MemoryHandle>::ok(MemoryHandle{id, mr.value->lkey, mr.value->rkey});
}

Status RdmaTransport::deregister_memory(MemoryHandle mr) {
  owner_.check();
  for (auto it = mrs_.begin(); it != mrs_.end(); ++it) {
    if (it->first != mr.id) continue;
    // The owner guarantees no WR still uses it (the SendDone contract).
    ibv_dereg_mr(it->second);
    mrs_.erase(it);
    return Status::Ok;
  }
  return Status::BadRequest;
}

}  // namespace ferry::transport::rdma
