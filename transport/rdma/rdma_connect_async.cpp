// RdmaConnector::connect_async: the active side of rdma_cm without waiting.
// The id lives on the transport's shared event channel; poll() hands each
// of its events to on_connect_event(), which takes the next step:
//   resolve_addr -> ADDR_RESOLVED -> resolve_route -> ROUTE_RESOLVED ->
//   QP + rdma_connect -> CONNECT_RESPONSE -> RTS + rdma_establish -> Open
// and reports Connected. Address resolution is retried in short attempts
// like connect() does (the first one to a new neighbour may only start ARP).
// Any failure, or connect_timeout_ms without an answer, tears it down and
// reports Closed with PeerUnreachable (Busy when the peer rejected it for
// want of a slot; the log says why a peer rejected it, cm_reject.h); close()
// abandons it quietly.
#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "transport/rdma/device.h"
#include "transport/rdma/rdma_connector.h"

namespace ferry::transport::rdma {
namespace {

constexpr int kResolveAttemptMs = 2000;

int left_ms(const RdmaConnection& c) noexcept {
  const std::int64_t left = c.connect_deadline_ms - steady_ms();
  return left > 0 ? static_cast<int>(std::min<std::int64_t>(left, 1 << 30)) : 0;
}

}  // namespace

Result<ConnId> RdmaConnector::connect_async(std::string_view host, std::uint16_t port) {
  sockaddr_storage dst;
  if (!parse_sockaddr(host, port, dst)) return Result<ConnId>::fail(Status::BadRequest);
  const int islot = conns_.alloc_slot();
  if (islot < 0) return Result<ConnId>::fail(Status::Busy);
  if (!events_.port_active()) {  // rdma_cm must stay silent (rdma_device_events.cpp); the caller retries
    spdlog::debug("rdma: connect to {}:{}: port 1 of {} is down", host, port, device_name());
    return Result<ConnId>::fail(Status::PeerUnreachable);
  }
  const auto slot = static_cast<std::uint32_t>(islot);
  RdmaConnection& c = conns_[slot];
  c.dst = dst;
  c.have_src = !config_.address.empty() && parse_sockaddr(config_.address, 0, c.src);
  c.resolve_attempt = 0;
  c.connect_deadline_ms = steady_ms() + config_.connect_timeout_ms;
  c.state = ConnState::Connecting;
  ++conns_.connecting;
  if (!resolve_next(slot)) {
    spdlog::warn("rdma: connect to {}:{}: cannot start address resolution: {}", host, port, std::strerror(errno));
    --conns_.connecting;
    if (c.id != nullptr) rdma_destroy_id(c.id);
    c.id = nullptr;
    c.state = ConnState::Free;
    return Result<ConnId>::fail(Status::PeerUnreachable);
  }
  spdlog::debug("rdma: connecting to {}:{} as connection {}", host, port, slot);
  return Result<ConnId>::ok(conns_.id_of(slot));
}

bool RdmaConnector::resolve_next(std::uint32_t slot) noexcept {
  RdmaConnection& c = conns_[slot];
  if (c.id != nullptr) rdma_destroy_id(c.id);
  c.id = nullptr;
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel_, &id, reinterpret_cast<void*>(static_cast<std::uintptr_t>(slot)), RDMA_PS_TCP) != 0)
    return false;
  c.id = id;  // also keeps alloc_slot() off this slot
  ++c.resolve_attempt;
  const int t = std::clamp(left_ms(c), 1, kResolveAttemptMs);
  return rdma_resolve_addr(id, c.have_src ? reinterpret_cast<sockaddr*>(&c.src) : nullptr,
                           reinterpret_cast<sockaddr*>(&c.dst), t) == 0;
}

void RdmaConnector::on_connect_event(std::uint32_t slot, rdma_cm_event_type type, int status,
                                     CmReject rejected) noexcept {
  RdmaConnection& c = conns_[slot];
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (c.id->verbs != ctx_) {
        spdlog::error("rdma: route of connection {} leaves through device {}, not {}", slot,
                      c.id->verbs ? ibv_get_device_name(c.id->verbs->device) : "?", device_name());
        connect_failed(slot, "wrong device", Status::PeerUnreachable);
        return;
      }
      if (rdma_resolve_route(c.id, std::max(left_ms(c), 1)) != 0)
        connect_failed(slot, "rdma_resolve_route failed", Status::PeerUnreachable);
      return;
    case RDMA_CM_EVENT_ADDR_ERROR:
      if (left_ms(c) > 0) {
        spdlog::info("rdma: connection {}: address resolution attempt {} failed; retrying", slot, c.resolve_attempt);
        if (!resolve_next(slot)) connect_failed(slot, "rdma_resolve_addr failed", Status::PeerUnreachable);
        return;
      }
      connect_failed(slot, "address resolution failed", Status::PeerUnreachable);
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      if (qps_.setup(slot, c.id, false) != Status::Ok) {
        connect_failed(slot, "QP set-up failed", Status::PeerUnreachable);
        return;
      }
      rdma_conn_param p;
      qps_.conn_param(p, c.qp->qp_num);
      if (rdma_connect(c.id, &p) != 0) connect_failed(slot, "rdma_connect failed", Status::PeerUnreachable);
      return;
    }
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      // A QP made outside rdma_cm gets CONNECT_RESPONSE: ferry moves it to
      // RTS and confirms with rdma_establish.
      if (qps_.to_rts(slot) != Status::Ok || rdma_establish(c.id) != 0) {
        connect_failed(slot, "QP to RTS failed", Status::PeerUnreachable);
        return;
      }
      --conns_.connecting;
      c.state = ConnState::Open;
      c.report_connected = true;
      conns_.flag(slot);
      spdlog::debug("rdma: connection {} established", slot);
      return;
    default:
      if (type == RDMA_CM_EVENT_REJECTED && rejected != CmReject::Unknown) {
        // A full peer is waited for (Busy); one that could not take it is not reached.
        connect_failed(slot, cm_reject_text(rejected),
                       rejected == CmReject::NoRoom ? Status::Busy : Status::PeerUnreachable);
        return;
      }
      spdlog::info("rdma: connection {}: {} (status {}) while connecting", slot, rdma_event_str(type), status);
      connect_failed(slot, rdma_event_str(type), Status::PeerUnreachable);
      return;
  }
}

void RdmaConnector::connect_failed(std::uint32_t slot, const char* why, Status closed_status) noexcept {
  RdmaConnection& c = conns_[slot];
  if (c.state != ConnState::Connecting) return;
  if (closed_status != Status::Ok) spdlog::info("rdma: connect of connection {} failed: {}", slot, why);
  --conns_.connecting;
  if (c.qp != nullptr) ibv_destroy_qp(c.qp);
  events_.retire_id(c.id, false);  // a REQ may be out: destroying the id answers it with a REJ
  c.qp = nullptr;
  c.id = nullptr;
  // No WR was ever posted: report() emits just the Closed and frees the slot.
  c.state = ConnState::Draining;
  c.wr_status = Status::Cancelled;
  c.closed_status = closed_status;
  conns_.flag(slot);
}

void RdmaConnector::expire_connects() noexcept {
  const std::int64_t now = steady_ms();
  for (std::uint32_t i = 0; i < conns_.size() && conns_.connecting > 0; ++i) {
    if (conns_[i].state == ConnState::Connecting && now >= conns_[i].connect_deadline_ms)
      connect_failed(i, "no answer within the connect timeout", Status::PeerUnreachable);
  }
}

}  // namespace ferry::transport::rdma
