// Tunables of the tcp backend: the one home for them.
// The daemon fills this from its config file/flags; validate() checks ranges.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/status.h"
#include "transport/wire/handshake.h"
#include "transport/wire/header.h"

namespace ferry::transport::tcp {

// Compile-time capacities: arrays are sized by these at construction.
inline constexpr std::uint32_t kMaxConnections = 1024;   // slots; one bit each in the attention mask
inline constexpr std::uint32_t kSendQueueDepth = 256;    // WRs outstanding per connection
inline constexpr std::uint32_t kMaxIov = 64;             // iovecs per writev (header + payload per WR)
inline constexpr std::uint32_t kEpollBatch = 64;         // readiness events per poll()
inline constexpr std::size_t kRxSlackBytes = 64 * 1024;  // room to read past one full frame
// An idle connection (heartbeats) should commit no page of its own:
inline constexpr std::uint32_t kSqHotEntries = 8;            // send queue entries kept densely, for all slots
inline constexpr std::size_t kLandingBytes = 256 * 1024;     // shared first-read buffer of one poll
inline constexpr std::size_t kLandingReadBytes = 16 * 1024;  // at most this per first read into it
static_assert(kMaxConnections % 64 == 0, "the attention mask is whole 64-bit words");
static_assert(kMaxConnections <= 0xFFFF, "a ConnId carries slot + 1 in its low 16 bits");
static_assert((kSendQueueDepth & (kSendQueueDepth - 1)) == 0, "send queue index is masked");
static_assert(kSqHotEntries > 0 && kSqHotEntries < kSendQueueDepth);
static_assert(kLandingReadBytes <= kLandingBytes);
static_assert(kMaxIov >= 2 && kMaxIov % 2 == 0 && kMaxIov <= 1024, "two iovecs per WR, within IOV_MAX");

struct TcpConfig {
  // Connections (accepted + connected) at once: 1..kMaxConnections. Each
  // slot reserves address space for its send queue and receive buffer
  // (tcp_slot_memory.h); memory is committed only while a connection uses it.
  std::uint32_t max_connections = kMaxConnections;
  // Largest payload sent or accepted: wire::kMinMessageBytes..wire::kMaxPayloadBytes.
  // Each connection slot reserves a receive buffer of about this size.
  std::uint32_t max_message_bytes = 1u << 20;
  // Bound on connect(): 1..60000 ms; after it, PeerUnreachable.
  std::uint32_t connect_timeout_ms = 3000;
  // listen() backlog: 1..4096.
  std::uint32_t listen_backlog = 128;
  // SO_SNDBUF / SO_RCVBUF: 0 keeps the kernel default, else 1024..64 MiB.
  std::uint32_t sndbuf_bytes = 0;
  std::uint32_t rcvbuf_bytes = 0;
  // Accepted connections (transport/accept_guard.h): an accepted connection that
  // sends no complete frame within hello_timeout_ms (1..60000) is closed; at
  // most max_unvouched_per_source (1..kMaxConnections) not yet vouched for by
  // the owner come from one address; reserved_slots (0..kMaxConnections/2)
  // are never taken by such connections (dials and vouched ones keep them).
  std::uint32_t hello_timeout_ms = 2000;
  std::uint32_t max_unvouched_per_source = 16;
  std::uint32_t reserved_slots = 16;

  [[nodiscard]] Status validate() const noexcept {
    auto buf_ok = [](std::uint32_t b) { return b == 0 || (b >= 1024 && b <= (64u << 20)); };
    if (max_connections < 1 || max_connections > kMaxConnections) return Status::BadRequest;
    if (max_message_bytes < wire::kMinMessageBytes || max_message_bytes > wire::kMaxPayloadBytes) {
      return Status::BadRequest;
    }
    if (connect_timeout_ms < 1 || connect_timeout_ms > 60000) return Status::BadRequest;
    if (listen_backlog < 1 || listen_backlog > 4096) return Status::BadRequest;
    if (!buf_ok(sndbuf_bytes) || !buf_ok(rcvbuf_bytes)) return Status::BadRequest;
    if (hello_timeout_ms < 1 || hello_timeout_ms > 60000) return Status::BadRequest;
    if (max_unvouched_per_source < 1 || max_unvouched_per_source > kMaxConnections) return Status::BadRequest;
    if (reserved_slots > kMaxConnections / 2) return Status::BadRequest;
    return Status::Ok;
  }

  // Receive buffer per connection: one whole frame always fits after compaction.
  std::size_t rx_buffer_bytes() const noexcept { return wire::kHeaderBytes + max_message_bytes + kRxSlackBytes; }
};

}  // namespace ferry::transport::tcp
