// RdmaConnector: listening, the cm events of every connection and the
// passive side of a connection (connect requests). Control path, driven
// from poll()'s slow sources: may log.
#include <netinet/in.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "ferry/mono_clock.h"
#include "transport/deadline_timer.h"
#include "transport/rdma/cm_reject.h"
#include "transport/rdma/device.h"
#include "transport/rdma/rdma_connector.h"

namespace ferry::transport::rdma {
namespace {

constexpr int kListenBacklog = 128;

}  // namespace

RdmaConnector::RdmaConnector(const RdmaConfig& config, ConnectionTable& conns, QpFactory& qps, DeviceEvents& events,
                             RdmaFault& fault)
    : config_(config),
      conns_(conns),
      qps_(qps),
      events_(events),
      fault_(fault),
      timer_fd_(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) {}

RdmaConnector::~RdmaConnector() {
  if (timer_fd_ >= 0) ::close(timer_fd_);
}

const char* RdmaConnector::device_name() const noexcept {
  return ctx_ == nullptr ? "" : ibv_get_device_name(ctx_->device);
}

Result<std::uint16_t> RdmaConnector::listen(std::string_view host, std::uint16_t port) {
  if (listen_id_ != nullptr) return Result<std::uint16_t>::fail(Status::Busy);
  sockaddr_storage ss;
  if (!parse_sockaddr(host, port, ss)) return Result<std::uint16_t>::fail(Status::BadRequest);
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel_, &id, nullptr, RDMA_PS_TCP) != 0) return Result<std::uint16_t>::fail(Status::NoMemory);
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

void RdmaConnector::close_listener() noexcept {
  if (listen_id_ != nullptr) rdma_destroy_id(listen_id_);
  listen_id_ = nullptr;
}

void RdmaConnector::abandon(std::uint32_t slot) noexcept { connect_failed(slot, "closed by its owner", Status::Ok); }

void RdmaConnector::handle_events() noexcept {
  rdma_cm_event* ev = nullptr;
  while (rdma_get_cm_event(channel_, &ev) == 0) {
    // Copy what is needed and ack first: rdma_destroy_id waits for the acks
    // of its id's events, and the handlers below may destroy it.
    const rdma_cm_event_type type = ev->event;
    rdma_cm_id* id = ev->id;
    const int status = ev->status;
    const CmReject rejected = type == RDMA_CM_EVENT_REJECTED
                                  ? cm_reject_reason(ev->param.conn.private_data, ev->param.conn.private_data_len)
                                  : CmReject::Unknown;
    rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      on_connect_request(id);
      continue;
    }
    const auto slot = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(id->context));
    if (id == listen_id_ || slot >= conns_.size() || conns_[slot].id != id) continue;
    RdmaConnection& c = conns_[slot];
    if (c.state == ConnState::Connecting) {
      on_connect_event(slot, type, status, rejected);
      continue;
    }
    switch (type) {
      case RDMA_CM_EVENT_ESTABLISHED:
        if (c.state == ConnState::Accepting) {
          --conns_.accepting;
          c.state = ConnState::Open;
          c.report_accepted = true;
          conns_.flag(slot);
        }
        break;
      case RDMA_CM_EVENT_DISCONNECTED:
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
      case RDMA_CM_EVENT_REJECTED:
      case RDMA_CM_EVENT_UNREACHABLE:
      case RDMA_CM_EVENT_CONNECT_ERROR:
        spdlog::debug("rdma: connection {} {} (status {})", slot, rdma_event_str(type), status);
        conns_.begin_drain(slot, Status::PeerReset, Status::PeerReset);
        break;
      default: break;
    }
  }
}

int RdmaConnector::admit(const AcceptGuard::Source& src) noexcept {
  AcceptGuard& guard = conns_.guard;
  // As the tcp listener's admit(): at most two evictions (the source's cap,
  // then the budget). A torn-down Accepting connection frees its slot at
  // once; an Open one only once its Closed is reported.
  for (int round = 0; round < 3; ++round) {
    const int slot = conns_.alloc_slot();
    const AcceptGuard::Decision d = guard.admit(src, slot >= 0);
    if (d.verdict == AcceptGuard::Verdict::Admit) return slot;
    if (d.verdict == AcceptGuard::Verdict::Refuse) break;
    guard.evicted();
    conns_.begin_drain(d.victim, Status::PeerReset, Status::PeerReset);  // the owner hears Closed if it knew it
  }
  guard.refused(mono_ns());
  return -1;
}

void RdmaConnector::arm_timer() noexcept {
  if (timer_fd_ < 0) return;
  arm_timer_at(timer_fd_, conns_.guard.next_deadline_ns());  // 0: none, disarmed
}

void RdmaConnector::expire_silent() noexcept {
  std::uint64_t expiry = 0;
  while (timer_fd_ >= 0 && ::read(timer_fd_, &expiry, sizeof expiry) > 0) {
  }
  if (!conns_.guard.any_silent()) return;
  AttentionMask<kMaxConnections> due;
  if (conns_.guard.expired(mono_ns(), due) != 0) {
    for (std::uint32_t s = due.next(0); s != decltype(due)::kNone; s = due.next(s + 1))
      conns_.begin_drain(s, Status::PeerReset, Status::PeerReset);
  }
  arm_timer();
}

// Rejects a connection request saying why (cm_reject.h) and destroys its id.
void RdmaConnector::reject(rdma_cm_id* id, CmReject why) noexcept {
  const auto data = cm_reject_data(why);
  rdma_reject(id, data.data(), static_cast<std::uint8_t>(data.size()));
  rdma_destroy_id(id);
}

void RdmaConnector::on_connect_request(rdma_cm_id* id) noexcept {
  if (id->verbs != ctx_) {
    if (std::uint64_t skipped = 0; other_device_log_.allow(skipped))
      spdlog::warn("rdma: connect request on another device; rejected ({} more since the last such line)", skipped);
    reject(id, CmReject::OtherDevice);
    return;
  }
  sockaddr_storage from{};
  if (const sockaddr* peer = rdma_get_peer_addr(id); peer != nullptr)
    std::memcpy(&from, peer, peer->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  const AcceptGuard::Source src = AcceptGuard::source_of(from);
  const int slot = admit(src);
  if (slot < 0) {
    // Counted and logged (at most once per 10 s) by the guard; the reason
    // lets the dialler wait for room instead of taking us for unreachable.
    reject(id, CmReject::NoRoom);
    return;
  }
  const auto s = static_cast<std::uint32_t>(slot);
  rdma_conn_param p;
  if (fault_.refuse_qp() /* test-only (rdma_fault.h) */ || qps_.setup(s, id, true) != Status::Ok) {
    reject(id, CmReject::NoQp);
    return;
  }
  qps_.conn_param(p, conns_[s].qp->qp_num);
  conns_[s].state = ConnState::Accepting;
  ++conns_.accepting;
  conns_.guard.accepted(s, src, mono_ns());
  arm_timer();
  if (rdma_accept(id, &p) != 0) {
    spdlog::warn("rdma: rdma_accept failed: {}", std::strerror(errno));
    conns_.begin_drain(s, Status::PeerReset, Status::PeerReset);
  }
}

}  // namespace ferry::transport::rdma
