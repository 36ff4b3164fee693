// Per-connection state of the rdma backend. Private to rdma/.
//
// Send ring: per WR, what its SendDone needs. Three free-running counters:
// [head, done) finished on the NIC (a signaled CQE covers every earlier WR
// of the QP) and await their SendDone report, [done, tail) are on the NIC.
// Slot i of the connection's send slab (header + prefix) belongs to ring
// entry i & (kSendQueueDepth - 1) until that entry is reported; so does the
// shared bounce slot it names, if any.
//
// Receives: none of its own; its QP takes them from the transport's shared
// receive queue (rdma_transport.h).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "ferry/status.h"
#include "transport/rdma/rdma_config.h"

namespace ferry::transport::rdma {

// Monotonic milliseconds: connect deadlines, the port poll of parked ids.
inline std::int64_t steady_ms() noexcept {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

enum class ConnState : std::uint8_t {
  Free = 0,        // slot unused
  Accepting = 1,   // passive side: accepted, waiting for ESTABLISHED
  Open = 2,        // QP in RTS
  Draining = 3,    // QP and id destroyed; reporting the remaining WRs, then Closed
  Connecting = 4,  // active side of connect_async(): rdma_cm resolving, connecting
};

constexpr std::string_view to_string(ConnState s) noexcept {
  switch (s) {
    case ConnState::Free: return "Free";
    case ConnState::Accepting: return "Accepting";
    case ConnState::Open: return "Open";
    case ConnState::Draining: return "Draining";
    case ConnState::Connecting: return "Connecting";
  }
  return "Unknown";
}

inline constexpr std::uint32_t kNoBounce = 0xFFFFFFFFu;

struct SendEntry {
  std::uint64_t user_data = 0;
  bool user_signaled = false;        // the owner wants a SendDone on success
  std::uint32_t bounce = kNoBounce;  // the bounce slot its payload was copied to, until reported
};

struct RdmaConnection {
  ConnState state = ConnState::Free;
  std::uint16_t generation = 1;
  bool report_accepted = false;       // an Accepted completion is owed
  bool report_connected = false;      // a Connected completion is owed (connect_async)
  Status wr_status = Status::Ok;      // Draining: status of the WRs still pending
  Status closed_status = Status::Ok;  // Draining: status of the final Closed
  rdma_cm_id* id = nullptr;
  ibv_qp* qp = nullptr;

  std::array<SendEntry, kSendQueueDepth> sq{};
  std::uint32_t sq_head = 0;
  std::uint32_t sq_done = 0;
  std::uint32_t sq_tail = 0;
  std::uint32_t unsignaled = 0;  // WRs posted since the last signaled one

  // connect_async() (rdma_connect_async.cpp): where to, and until when.
  sockaddr_storage dst{};
  sockaddr_storage src{};
  bool have_src = false;
  std::uint32_t resolve_attempt = 0;
  std::int64_t connect_deadline_ms = 0;  // steady clock

  std::uint32_t sq_used() const noexcept { return sq_tail - sq_head; }
  SendEntry& sq_at(std::uint32_t i) noexcept { return sq[i & (kSendQueueDepth - 1)]; }
};

// wr_id layout, so a CQE names its connection without a lookup table:
//   bits 0..15 slot, 16..31 generation, 32..62 ring counter / receive slot,
//   bit 63 set for receives. A stale generation marks a CQE of a QP already
//   torn down; it is dropped.
struct WrId {
  std::uint32_t slot;
  std::uint16_t generation;
  std::uint32_t index;
  bool recv;

  static constexpr std::uint64_t kRecvBit = 1ull << 63;
  std::uint64_t encode() const noexcept {
    return static_cast<std::uint64_t>(slot & 0xFFFFu) | (static_cast<std::uint64_t>(generation) << 16) |
           (static_cast<std::uint64_t>(index & 0x7FFFFFFFu) << 32) | (recv ? kRecvBit : 0);
  }
  static WrId decode(std::uint64_t v) noexcept {
    return WrId{static_cast<std::uint32_t>(v & 0xFFFFu), static_cast<std::uint16_t>(v >> 16),
                static_cast<std::uint32_t>((v >> 32) & 0x7FFFFFFFu), (v & kRecvBit) != 0};
  }
};

}  // namespace ferry::transport::rdma
