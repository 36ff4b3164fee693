// RdmaTransport setup: construction and the verbs resources, close,
// memory registration; listen and connect go to the connector. Not on the
// datapath: may allocate and log.
#include "transport/rdma/rdma_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
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

constexpr std::uint64_t kTimerTag = 3;  // the connector's first-message deadlines

AcceptGuardConfig admission(const RdmaConfig& c) noexcept {
  AcceptGuardConfig g;
  g.max_connections = c.max_connections;
  g.reserve = c.reserved_slots;
  g.per_source = c.max_unvouched_per_source;
  g.hello_timeout_ms = c.hello_timeout_ms;
  return g;
}

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
      conns_(config_.max_connections, events_, admission(config_)),
      qps_(config_, conns_, gid_),
      connector_(config_, conns_, qps_, events_, fault_) {}

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
  const std::uint32_t pool = config_.pool_receives();
  ibv_device_attr da{};
  if (ibv_query_device(ctx_, &da) != 0) da = ibv_device_attr{};
  // Every send WR of every QP plus every receive could complete at once;
  // past the device's limit the CQ is as large as it allows (selective
  // signalling keeps real use far below the bound).
  std::uint64_t want_cqe = std::uint64_t{config_.max_connections} * kSendQueueDepth + pool;
  if (da.max_cqe > 0 && want_cqe > static_cast<std::uint64_t>(da.max_cqe)) {
    spdlog::warn("rdma: {}: a CQ for {} entries exceeds the device's {}; using {}", dev.value.name, want_cqe,
                 da.max_cqe, da.max_cqe);
    want_cqe = static_cast<std::uint64_t>(da.max_cqe);
  }
  const int cqe = static_cast<int>(want_cqe);
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
  ev.data.u64 = kTimerTag;
  if (connector_.timer_fd() >= 0 && epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, connector_.timer_fd(), &ev) != 0)
    return Status::NoMemory;
  if (ibv_req_notify_cq(cq_, 0) != 0) return Status::NoMemory;
  cq_armed_ = true;
  if (da.max_srq_wr > 0 && pool > static_cast<std::uint32_t>(da.max_srq_wr)) {
    spdlog::error("rdma: {}: a receive pool of {} exceeds the device's {} receives per SRQ", dev.value.name, pool,
                  da.max_srq_wr);
    return Status::BadRequest;
  }
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = pool;
  sa.attr.max_sge = 1;
  srq_ = ibv_create_srq(pd_, &sa);
  if (srq_ == nullptr) {
    spdlog::error("rdma: ibv_create_srq({}) failed: {}", pool, std::strerror(errno));
    return Status::NoMemory;
  }
  qps_.attach(pd_, cq_, srq_);
  connector_.attach(ctx_, cm_channel_);

  const std::size_t slot = config_.slot_bytes();
  Status s = recv_slab_.init(pd_, std::size_t{pool} * slot);
  if (s == Status::Ok)
    s = send_slab_.init(pd_, std::size_t{config_.max_connections} * kSendQueueDepth * kHeadSlotBytes);
  if (s == Status::Ok) s = bounce_slab_.init(pd_, std::size_t{config_.bounce_slots} * slot);
  bounce_free_ = std::make_unique<std::uint32_t[]>(config_.bounce_slots);
  for (std::uint32_t b = 0; b < config_.bounce_slots; ++b) bounce_free_[b] = config_.bounce_slots - 1 - b;
  bounce_top_ = config_.bounce_slots;
  if (s == Status::Ok) s = post_pool();
  if (s != Status::Ok) return s;
  stats_.recv_registered_bytes = recv_slab_.size();
  stats_.send_registered_bytes = send_slab_.size() + bounce_slab_.size();
  const bool software = rdma::software_provider(ctx_);
  spdlog::info(
      "rdma: {} ready: {} connections, eager {} B, shared receive queue {} x {} B = {} KiB, send slab {} KiB, "
      "{} bounce slots = {} KiB, QPs of {} send WRs with {} B inline{}, ack_timeout {}, retry_cnt {}, rnr_retry 0",
      dev.value.name, config_.max_connections, config_.max_eager_bytes, pool, slot, recv_slab_.size() / 1024,
      send_slab_.size() / 1024, config_.bounce_slots, bounce_slab_.size() / 1024, kSendQueueDepth - 1,
      software ? std::min(config_.max_inline, kSoftwareMaxInline) : config_.max_inline,
      software ? " (software provider: small queue elements)" : "", config_.ack_timeout, config_.retry_cnt);
  return Status::Ok;
}

Status RdmaTransport::post_pool() noexcept {
  const auto len = static_cast<std::uint32_t>(wire::kHeaderBytes + config_.max_eager_bytes);
  const std::uint32_t pool = config_.pool_receives();
  // In chains of kRepostCapacity, with the datapath's own arrays.
  for (std::uint32_t first = 0; first < pool; first += kRepostCapacity) {
    const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(kRepostCapacity, pool - first));
    for (std::uint32_t k = 0; k < n; ++k) {
      recv_sge_[k] = ibv_sge{reinterpret_cast<std::uintptr_t>(recv_slot(first + k)), len, recv_slab_.lkey()};
      recv_wr_[k] = ibv_recv_wr{};
      recv_wr_[k].wr_id = WrId{0, 0, first + k, true}.encode();
      recv_wr_[k].sg_list = &recv_sge_[k];
      recv_wr_[k].num_sge = 1;
      recv_wr_[k].next = k + 1 < n ? &recv_wr_[k + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_srq_recv(srq_, recv_wr_.data(), &bad) != 0) {
      spdlog::error("rdma: posting receives {}..{} of the pool failed: {}", first, first + n, std::strerror(errno));
      return Status::NoMemory;
    }
  }
  return Status::Ok;
}

RdmaTransport::~RdmaTransport() {
  conns_.destroy_all();
  events_.destroy_parked();
  connector_.close_listener();
  if (srq_ != nullptr) ibv_destroy_srq(srq_);
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (comp_channel_ != nullptr) ibv_destroy_comp_channel(comp_channel_);
  for (auto& [id, mr] : mrs_) ibv_dereg_mr(mr);
  recv_slab_.reset();
  send_slab_.reset();
  bounce_slab_.reset();
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (cm_channel_ != nullptr) rdma_destroy_event_channel(cm_channel_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

void RdmaTransport::vouch(ConnId conn) noexcept {
  if (conns_.lookup(conn) != nullptr) conns_.guard.vouch(ConnectionTable::slot_of(conn));
}

Transport::AcceptCounts RdmaTransport::accept_counts() const noexcept {
  const AcceptGuardStats& g = conns_.guard.stats();
  return AcceptCounts{g.refused, g.evicted, g.timed_out};
}

TransportCaps RdmaTransport::caps() const noexcept {
  TransportCaps c;
  c.kind = TransportKind::Rdma;
  c.memory_registration = true;
  c.rdma_write = c.rdma_write_imm = c.rdma_read = true;
  c.max_message_bytes = config_.max_eager_bytes;
  c.send_queue_depth = kSendQueueDepth;
  c.recv_depth = kRecvDepth;
  c.recv_pool = config_.pool_receives();
  c.max_connections = config_.max_connections;
  return c;
}

const char* RdmaTransport::device_name() const noexcept {
  return ctx_ == nullptr ? "" : ibv_get_device_name(ctx_->device);
}

bool RdmaTransport::software_provider() const noexcept { return rdma::software_provider(ctx_); }

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

std::string RdmaTransport::peer_address(ConnId conn) const {
  const RdmaConnection* c = conns_.lookup(conn);
  if (c == nullptr) return {};
  const sockaddr* sa = c->id != nullptr ? rdma_get_peer_addr(c->id) : reinterpret_cast<const sockaddr*>(&c->dst);
  if (sa == nullptr || sa->sa_family != AF_INET) return {};
  char text[INET_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof text) == nullptr) return {};
  return text;
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
