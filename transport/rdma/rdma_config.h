// Tunables of the rdma backend: the one home for them.
// The daemon fills this from its config file/flags; validate() checks ranges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ferry/status.h"
#include "transport/wire/handshake.h"
#include "transport/wire/header.h"

namespace ferry::transport::rdma {

// Compile-time capacities: every array of the datapath is sized by these.
inline constexpr std::uint32_t kMaxConnections = 1024;   // one bit each in the attention mask
inline constexpr std::uint32_t kSendQueueDepth = 128;    // send ring per QP (the QP takes 127 at once: rdma_qp.cpp)
inline constexpr std::uint32_t kSoftwareMaxInline = 48;  // inline bytes on rxe/siw (rdma_qp.cpp)
inline constexpr std::uint32_t kRecvDepth = 128;         // credits a connection starts with (caps().recv_depth)
inline constexpr std::uint32_t kMaxRecvPool = 1u << 18;  // receives on the shared receive queue at most
inline constexpr std::size_t kSlotAlign = 64;            // receive/send slot stride alignment (cache line)
static_assert(kMaxConnections % 64 == 0, "the attention mask is whole 64-bit words");
// A send slot holds a header and a Send's prefix (transport.h kMaxPrefixBytes,
// 32): what goes with every message. Payloads copied at post time go to
// the shared bounce slab instead (bounce_slots).
inline constexpr std::size_t kHeadSlotBytes = 128;
static_assert((kSendQueueDepth & (kSendQueueDepth - 1)) == 0, "send ring index is masked");
static_assert((kRecvDepth & (kRecvDepth - 1)) == 0, "receive slot index is masked");
static_assert(wire::kHeaderBytes % 8 == 0, "payload after the header stays 8-byte aligned in a slot");

struct RdmaConfig {
  // Device by name ("rxe0", "mlx5_0"). Empty: the device whose port carries
  // `address` (or the only device when there is one).
  std::string device;
  // Local numeric IPv4 address this transport listens on and connects from.
  // Empty: any (only sensible with one device).
  std::string address;
  // Source GID index override: -1 picks the IPv4-mapped RoCE v2 GID of
  // `address` (gid.cpp), 0..255 forces that entry.
  int gid_index = -1;
  // Connections (accepted + connected) at once: 1..kMaxConnections. The
  // send slab (kSendQueueDepth x kHeadSlotBytes = 16 KiB each) is
  // preallocated for this many.
  std::uint32_t max_connections = 16;
  // Payload slots (slot_bytes() each) shared by every connection, for a
  // payload the NIC must copy from (no lkey, too large to go inline): 1..65536.
  // A post finding none free is Busy until a send completes.
  std::uint32_t bounce_slots = 64;
  // Receives posted on the transport's one shared receive queue (SRQ), each
  // a slot_bytes() slot of the receive slab: 0..kMaxRecvPool, 0 = enough
  // for every connection's recv_depth (max_connections x kRecvDepth). Every
  // QP takes its receives from it; the owner's credits must keep the peers'
  // messages in flight within it (daemon/peer/receive_pool.h).
  std::uint32_t recv_pool = 0;
  // Largest eager (Send) payload: wire::kMinMessageBytes..1 MiB. Each
  // receive slot is kHeaderBytes + this, rounded up to kSlotAlign.
  std::uint32_t max_eager_bytes = 4096;
  // Inline data requested at QP creation (header + payload up to it go
  // IBV_SEND_INLINE): 0..1024. The device may grant less.
  std::uint32_t max_inline = 256;
  // Unsignaled WRs between two signaled ones: 1..kSendQueueDepth/2 (1 = all
  // signaled). Bounds how long send slots stay unreclaimed.
  std::uint32_t signal_every = 16;
  // Bound on connect() (address + route resolution + handshake): 1..60000 ms.
  std::uint32_t connect_timeout_ms = 5000;
  // IB local ACK timeout exponent (4.096 us * 2^timeout): 1..31. Real NICs
  // use ~14; the Soft-RoCE VM needs 18-20 since emulation drops and delays.
  std::uint8_t ack_timeout = 14;
  // Transport retries before IBV_WC_RETRY_EXC_ERR: 0..7.
  std::uint8_t retry_cnt = 7;
  // RDMA READs in flight per QP, each direction: 1..16.
  std::uint8_t rd_atomic = 8;
  // Connection requests the connection manager accepted, as the tcp
  // bootstrap listener's (transport/accept_guard.h): one that brings no
  // first message within hello_timeout_ms (1..60000; its QP may not even
  // reach RTS) is torn down; at most max_unvouched_per_source
  // (1..kMaxConnections) not yet vouched for by the owner come from one
  // address; reserved_slots (0..kMaxConnections/2) are never taken by such
  // requests (the owner's own connects keep them). At either cap the
  // oldest silent one makes room, else the request is rejected.
  std::uint32_t hello_timeout_ms = 2000;
  std::uint32_t max_unvouched_per_source = 16;
  std::uint32_t reserved_slots = 4;
  // rnr_retry is deliberately not configurable: it is always 0. An RNR NAK
  // means ferry posted a message beyond the peer's credits, a bug that must
  // fail loudly (IBV_WC_RNR_RETRY_EXC_ERR), not be papered over by retries.

  [[nodiscard]] Status validate() const noexcept {
    if (gid_index < -1 || gid_index > 255) return Status::BadRequest;
    if (max_connections < 1 || max_connections > kMaxConnections) return Status::BadRequest;
    if (recv_pool > kMaxRecvPool) return Status::BadRequest;
    if (bounce_slots < 1 || bounce_slots > 65536) return Status::BadRequest;
    if (max_eager_bytes < wire::kMinMessageBytes || max_eager_bytes > (1u << 20)) return Status::BadRequest;
    if (max_inline > 1024) return Status::BadRequest;
    if (signal_every < 1 || signal_every > kSendQueueDepth / 2) return Status::BadRequest;
    if (connect_timeout_ms < 1 || connect_timeout_ms > 60000) return Status::BadRequest;
    if (ack_timeout < 1 || ack_timeout > 31) return Status::BadRequest;
    if (retry_cnt > 7) return Status::BadRequest;
    if (rd_atomic < 1 || rd_atomic > 16) return Status::BadRequest;
    if (hello_timeout_ms < 1 || hello_timeout_ms > 60000) return Status::BadRequest;
    if (max_unvouched_per_source < 1 || max_unvouched_per_source > kMaxConnections) return Status::BadRequest;
    if (reserved_slots > kMaxConnections / 2) return Status::BadRequest;
    return Status::Ok;
  }

  // Receives on the shared queue, 0 resolved.
  std::uint32_t pool_receives() const noexcept { return recv_pool != 0 ? recv_pool : max_connections * kRecvDepth; }

  // Stride of one receive or send slot: header + largest eager payload.
  std::size_t slot_bytes() const noexcept {
    return (wire::kHeaderBytes + max_eager_bytes + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
  }
};

}  // namespace ferry::transport::rdma
