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

#include <chrono>

#include "transport/rdma/rdma_transport.h"

namespace ferry::transport::rdma {

namespace {
constexpr std::int64_t kPortPollMs = 100;  // how often parked ids look at the port
std::int64_t steady_ms() noexcept {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

bool RdmaTransport::port_active() noexcept {
  ibv_port_attr a{};
  return ibv_query_port(ctx_, 1, &a) == 0 && a.state == IBV_PORT_ACTIVE;
}

void RdmaTransport::retire_id(rdma_cm_id* id, bool disconnect) noexcept {
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

void RdmaTransport::release_parked_ids() noexcept {
  const std::int64_t now = steady_ms();
  if (now < next_port_poll_ms_) return;
  next_port_poll_ms_ = now + kPortPollMs;
  if (!port_active()) return;
  spdlog::info("rdma: {} port 1 is active again: releasing {} connection ids", device_name(), parked_ids_.size());
  for (rdma_cm_id* id : parked_ids_) rdma_destroy_id(id);
  parked_ids_.clear();
}

}  // namespace ferry::transport::rdma
