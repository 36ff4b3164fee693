// The connection table: slot allocation, ConnIds, and teardown (which
// parks cm ids while the port is down: rdma_device_events.cpp).
#include "transport/rdma/rdma_connections.h"

#include <spdlog/spdlog.h>

#include "transport/rdma/rdma_device_events.h"

namespace ferry::transport::rdma {

ConnectionTable::ConnectionTable(std::uint32_t max, DeviceEvents& events, const AcceptGuardConfig& admission)
    : qps(max),
      guard(admission, "rdma connection manager"),
      max_(max),
      events_(events),
      conns_(new RdmaConnection[max]) {}

int ConnectionTable::alloc_slot() const noexcept {
  for (std::uint32_t i = 0; i < max_; ++i) {
    if (conns_[i].state == ConnState::Free && conns_[i].id == nullptr) return static_cast<int>(i);
  }
  return -1;
}

ConnId ConnectionTable::id_of(std::uint32_t slot) const noexcept {
  return (static_cast<ConnId>(conns_[slot].generation) << 16) | (slot + 1);
}

RdmaConnection* ConnectionTable::lookup(ConnId conn) noexcept {
  const std::uint32_t low = conn & 0xFFFFu;
  if (low == 0 || low > max_) return nullptr;
  RdmaConnection& c = conns_[low - 1];
  if (c.state == ConnState::Free || (conn >> 16) != c.generation) return nullptr;
  return &c;
}

ibv_qp* ConnectionTable::qp_of(ConnId conn) noexcept {
  RdmaConnection* c = lookup(conn);
  return c == nullptr || c->state != ConnState::Open ? nullptr : c->qp;
}

void ConnectionTable::begin_drain(std::uint32_t slot, Status wr_status, Status closed_status) noexcept {
  RdmaConnection& c = conns_[slot];
  if (c.state != ConnState::Open && c.state != ConnState::Accepting) return;
  guard.forget(slot);
  // Tear the QP down at once: in the error state it starts no WR again and
  // flushes the rest, so every pending WR can be reported now (a lane
  // replays from client memory that stays registered, and a bounce slot
  // reused meanwhile is never sent by a QP in error); CQEs of the old QP
  // still in the CQ are dropped (state is no longer Open). The destroy
  // itself goes to the reaper, since it may block for seconds
  // (qp_reaper.h). The QP is ferry's own (never attached to the cm id), so
  // the order of the two teardowns does not matter; with the port down the
  // id waits instead of disconnecting (rdma_device_events.cpp).
  if (c.qp != nullptr) {
    const std::uint32_t qpn = c.qp->qp_num;
    qps.erase(qpn);
    ibv_qp_attr err{};
    err.qp_state = IBV_QPS_ERR;
    if (ibv_modify_qp(c.qp, &err, IBV_QP_STATE) != 0) spdlog::debug("rdma: QP {} refused the error state", qpn);
    reaper_.destroy(c.qp);
  }
  events_.retire_id(c.id, true);
  c.qp = nullptr;
  c.id = nullptr;
  if (c.state == ConnState::Accepting) {
    // The owner never heard of it: no Closed either.
    --accepting;
    free_slot(slot);
    return;
  }
  c.state = ConnState::Draining;
  c.wr_status = wr_status;
  c.closed_status = closed_status;
  flag(slot);
}

void ConnectionTable::free_slot(std::uint32_t slot) noexcept {
  RdmaConnection& c = conns_[slot];
  guard.forget(slot);
  c.state = ConnState::Free;
  c.report_accepted = false;
  if (++c.generation == 0) c.generation = 1;  // ConnId 0 stays invalid; stale ids stop matching
  attention.clear(slot);
}

void ConnectionTable::destroy_all() noexcept {
  reaper_.drain();
  for (std::uint32_t i = 0; i < max_; ++i) {
    RdmaConnection& c = conns_[i];
    if (c.qp != nullptr) {
      qps.erase(c.qp->qp_num);
      ibv_destroy_qp(c.qp);
    }
    if (c.id != nullptr) rdma_destroy_id(c.id);
    c.qp = nullptr;
    c.id = nullptr;
  }
}

}  // namespace ferry::transport::rdma
