// RdmaTransport setup: construction and the verbs resources, close,
// memory registration; listen and connect go to the connector. Not on the
// datapath: may allocate and log.
#include "transport/rdma/rdma_transport.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include <spdlog/spdlog.h>

#include "transport/rdma/device.h"

namespace ferry::transport::rdma {
namespace {

constexpr std::uint64_t kCqTag = 0;
constexpr std::uint64_t kCmTag = 1;
constexpr std::uint64_t kAsyncTag = 2;

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

RdmaTransport::RdmaTransport(const RdmaConfig& config)
    : config_(config),
      conns_(config_.max_connections, events_),
      qps_(config_, conns_, recv_slab_, gid_),
      connector_(config_, conns_, qps_, events_) {}

Status RdmaTransport::init() {
  auto dev = pick_device(config_);
  if (!dev) return dev.status;
  ctx_ = dev.value.ctx;
  events_.attach(ctx_);

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
  qps_.attach(pd_, cq_);
  connector_.attach(ctx_, cm_channel_);

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
  conns_.destroy_all();
  events_.destroy_parked();
  connector_.close_listener();
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

bool RdmaTransport::software_provider() const noexcept {
  const std::string_view name = device_name();
  return name.starts_with("rxe") || name.starts_with("siw");
}

Result<std::uint16_t> RdmaTransport::listen(std::string_view host, std::uint16_t port) {
  owner_.check();
  return connector_.listen(host, port);
}

Result<ConnId> RdmaTransport::connect(std::string_view host, std::uint16_t port) {
  owner_.check();
  return connector_.connect(host, port);
}

Result<ConnId> RdmaTransport::connect_async(std::string_view host, std::uint16_t port) {
  owner_.check();
  return connector_.connect_async(host, port);
}

Status RdmaTransport::close(ConnId conn) {
  owner_.check();
  RdmaConnection* c = conns_.lookup(conn);
  if (c != nullptr && c->state == ConnState::Connecting) {
    connector_.abandon(ConnectionTable::slot_of(conn));  // a quiet Closed
    return Status::Ok;
  }
  if (c == nullptr || c->state != ConnState::Open) return Status::EndpointClosed;
  conns_.begin_drain(ConnectionTable::slot_of(conn), Status::Cancelled, Status::Ok);
  return Status::Ok;
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
