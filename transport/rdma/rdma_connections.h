// The connection table of the rdma backend: slots, ConnIds, teardown.
// Private to rdma/. Shared by the datapath (RdmaTransport), the connector
// (rdma_cm) and the device-event handler; owned by the transport.
//
// A ConnId is generation << 16 | (slot + 1): a slot's generation moves on
// when it is freed, so a stale id stops matching. `attention` has a bit per
// slot whose completions (SendDone, Accepted, Connected, Closed) are owed
// but that the CQ will not signal again; the datapath's report sweep clears
// it.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>

#include "ferry/status.h"
#include "transport/accept_guard.h"
#include "transport/attention_mask.h"
#include "transport/rdma/qp_index.h"
#include "transport/rdma/qp_reaper.h"
#include "transport/rdma/rdma_connection.h"
#include "transport/transport.h"

namespace ferry::transport::rdma {

class DeviceEvents;

class ConnectionTable {
 public:
  // `max` slots in use (1..kMaxConnections); `events` retires cm ids (it
  // parks them while the port is down); `admission`: the limits on
  // accepted connection requests (guard).
  ConnectionTable(std::uint32_t max, DeviceEvents& events, const AcceptGuardConfig& admission);
  ConnectionTable(const ConnectionTable&) = delete;
  ConnectionTable& operator=(const ConnectionTable&) = delete;

  std::uint32_t size() const noexcept { return max_; }
  RdmaConnection& operator[](std::uint32_t slot) noexcept { return conns_[slot]; }
  const RdmaConnection& operator[](std::uint32_t slot) const noexcept { return conns_[slot]; }

  // A free slot (no cm id either), or -1 when all are in use.
  int alloc_slot() const noexcept;
  ConnId id_of(std::uint32_t slot) const noexcept;
  static std::uint32_t slot_of(ConnId conn) noexcept { return (conn & 0xFFFFu) - 1; }
  // The connection of a live id, nullptr for an unknown or stale one.
  RdmaConnection* lookup(ConnId conn) noexcept;
  const RdmaConnection* lookup(ConnId conn) const noexcept { return const_cast<ConnectionTable*>(this)->lookup(conn); }
  // The QP of an open connection, nullptr otherwise.
  ibv_qp* qp_of(ConnId conn) noexcept;

  // Tears an Open or Accepting connection down now (QP into the error
  // state and handed to the reaper, id retired); an Open one drains: its
  // pending WRs complete with wr_status, then Closed with closed_status.
  void begin_drain(std::uint32_t slot, Status wr_status, Status closed_status) noexcept;
  void free_slot(std::uint32_t slot) noexcept;
  void flag(std::uint32_t slot) noexcept { attention.set(slot); }
  // Destroys every QP (the reaper's too) and cm id (the transport's destructor).
  void destroy_all() noexcept;

  AttentionMask<kMaxConnections> attention;  // bit per slot: completions owed that the CQ will not signal again
  QpIndex qps;                               // qp_num -> slot of every live QP (receive CQEs of the shared queue)
  std::uint32_t accepting = 0;               // connections in Accepting (their first CQE may beat ESTABLISHED)
  std::uint32_t connecting = 0;              // connections in Connecting (connect_async)
  // Accepted connection requests until the owner vouches for them: caps,
  // first-message deadline, eviction (transport/accept_guard.h). Told of
  // every accept (the connector), first receive (the datapath) and end
  // (begin_drain, free_slot).
  AcceptGuard guard;

 private:
  std::uint32_t max_;
  DeviceEvents& events_;
  std::unique_ptr<RdmaConnection[]> conns_;
  QpReaper reaper_;
};

}  // namespace ferry::transport::rdma
