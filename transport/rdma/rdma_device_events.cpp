// The device's own events, and rdma_cm while the port is down.
//
// Async events (ibv_get_async_event, from the transport's epoll set): port
// down/up, QP errors the NIC raised outside a completion (a peer's access
// through a bad key: IBV_EVENT_QP_ACCESS_ERR), a fatal device. Each is
// logged with what it is about; a QP's fatal event drains its connection
// (its WRs complete with an error, the owner gets Closed), a fatal device
// drains them all. Port events also release parked ids (below) at once.
//
// rdma_cm while the port is down: send it nothing.
//
// Every rdma_cm exchange (REQ, REP, DREQ, REJ) is a MAD on the device's QP1.
// On Soft-RoCE a MAD sent while the netdev under the device is down fails
// to route, the failure moves QP1 to error, and the MAD layer's recovery
// brings back only its send side: from then on the device drops every
// incoming connection message and no new connection succeeds until the
// device is recreated (found by the VM's link-flap check, fault-link-down;
// README "Reliability"). Disconnecting a
// connection, destroying an established or connecting id (the kernel sends
// a DREQ or REJ for it) and connecting all send one.
//
// So while port 1 is not ACTIVE the transport tears a connection down
// locally (its QP is destroyed: the NIC touches nothing more) but keeps its
// cm id, parked, and destroys it once the port is back; and it refuses new
// connects at once (PeerUnreachable) instead of resolving a route. The
// peer notices through its own QP's retries or its heartbeats, as it would
// for a dead link anyway. On hardware this costs nothing: a port that is
// down cannot carry those messages either.
#include <spdlog/spdlog.h>

#include "transport/rdma/rdma_device_events.h"

#include "transport/rdma/rdma_connections.h"

namespace ferry::transport::rdma {

namespace {
constexpr std::int64_t kPortPollMs = 100;  // how often parked ids look at the port
}  // namespace

std::uint64_t DeviceEvents::handle(ConnectionTable& conns) noexcept {
  std::uint64_t handled = 0;
  ibv_async_event ev{};
  while (ibv_get_async_event(ctx_, &ev) == 0) {
    const ibv_event_type type = ev.event_type;
    ibv_qp* qp = nullptr;
    if (type == IBV_EVENT_QP_FATAL || type == IBV_EVENT_QP_REQ_ERR || type == IBV_EVENT_QP_ACCESS_ERR ||
        type == IBV_EVENT_COMM_EST || type == IBV_EVENT_SQ_DRAINED || type == IBV_EVENT_PATH_MIG ||
        type == IBV_EVENT_PATH_MIG_ERR || type == IBV_EVENT_QP_LAST_WQE_REACHED)
      qp = ev.element.qp;
    ibv_ack_async_event(&ev);  // before acting: destroying a QP waits for its events' acks
    ++handled;
    switch (type) {
      case IBV_EVENT_PORT_ERR: spdlog::warn("rdma: {} port 1 went down", device_name()); break;
      case IBV_EVENT_PORT_ACTIVE:
        spdlog::info("rdma: {} port 1 is active", device_name());
        next_port_poll_ms_ = 0;
        if (!parked_ids_.empty()) release_parked_ids();
        break;
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
        for (std::uint32_t i = 0; i < conns.size(); ++i) {
          if (conns[i].qp != qp || qp == nullptr) continue;
          spdlog::warn("rdma: connection {} (QP {}): {}{}", i, qp->qp_num, ibv_event_type_str(type),
                       type == IBV_EVENT_QP_ACCESS_ERR ? " (the peer used a key or address it was not given)" : "");
          conns.begin_drain(i, Status::PeerReset, Status::PeerReset);
        }
        break;
      case IBV_EVENT_DEVICE_FATAL:
        spdlog::error("rdma: {}: fatal device error; every connection fails", device_name());
        for (std::uint32_t i = 0; i < conns.size(); ++i) conns.begin_drain(i, Status::PeerReset, Status::PeerReset);
        break;
      default: spdlog::debug("rdma: {}: {}", device_name(), ibv_event_type_str(type)); break;
    }
  }
  return handled;
}

bool DeviceEvents::port_active() noexcept {
  ibv_port_attr a{};
  return ibv_query_port(ctx_, 1, &a) == 0 && a.state == IBV_PORT_ACTIVE;
}

void DeviceEvents::retire_id(rdma_cm_id* id, bool disconnect) noexcept {
  if (id == nullptr) return;
  if (!port_active()) {
    if (parked_ids_.empty())
      spdlog::warn("rdma: {} port 1 is down: closing connections without rdma_cm", device_name());
    parked_ids_.push_back(id);
    return;
  }
  if (disconnect) rdma_disconnect(id);
  rdma_destroy_id(id);
}

void DeviceEvents::release_parked_ids() noexcept {
  const std::int64_t now = steady_ms();
  if (now < next_port_poll_ms_) return;
  next_port_poll_ms_ = now + kPortPollMs;
  if (!port_active()) return;
  spdlog::info("rdma: {} port 1 is active again: releasing {} connection ids", device_name(), parked_ids_.size());
  for (rdma_cm_id* id : parked_ids_) rdma_destroy_id(id);
  parked_ids_.clear();
}

void DeviceEvents::destroy_parked() noexcept {
  for (rdma_cm_id* id : parked_ids_) rdma_destroy_id(id);
  parked_ids_.clear();
}

const char* DeviceEvents::device_name() const noexcept {
  return ctx_ == nullptr ? "" : ibv_get_device_name(ctx_->device);
}

}  // namespace ferry::transport::rdma
