// Per-connection state of the tcp backend. Private to tcp/.
//
// Send queue: a ring of WRs with their headers already encoded. Three
// free-running counters split it: [head, written) went out and await their
// SendDone report, [written, tail) wait for the socket; write_offset counts
// bytes of the WR at `written` already sent (partial writes). An empty ring
// starts again at 0, so a connection that sends one message at a time
// (heartbeats) only uses its first entries, which are kept densely with
// every other slot's (`hot`): an idle connection has no page of its own.
//
// Receive buffer: [rx_begin, rx_end) holds bytes not yet handed out. Recv
// completions point into it, so it is compacted only at the start of the
// next poll() (when those pointers expire by contract).
//
// Both live in the transport's SlotMemory (tcp_slot_memory.h), not here:
// a slot costs its pages only while a connection writes them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ferry/status.h"
#include "transport/tcp/tcp_config.h"
#include "transport/wire/header.h"

namespace ferry::transport::tcp {

enum class ConnState : std::uint8_t {
  Free = 0,        // slot unused
  Open = 1,        // fd live
  Draining = 2,    // fd closed; reporting the remaining WRs, then Closed
  Connecting = 3,  // connect_async: the socket connects in the background
};

constexpr std::string_view to_string(ConnState s) noexcept {
  switch (s) {
    case ConnState::Free: return "Free";
    case ConnState::Open: return "Open";
    case ConnState::Draining: return "Draining";
    case ConnState::Connecting: return "Connecting";
  }
  return "Unknown";
}

struct PendingWr {
  std::array<std::byte, wire::kHeaderBytes> header;
  const std::byte* payload;
  std::uint32_t payload_len;
  bool signaled;
  std::uint64_t user_data;

  std::size_t frame_bytes() const noexcept { return wire::kHeaderBytes + payload_len; }
};

struct TcpConnection {
  int fd = -1;
  ConnState state = ConnState::Free;
  std::uint16_t generation = 0;
  bool want_write = false;                // EPOLLOUT armed
  Status close_status = Status::Ok;       // reported in Closed
  std::uint64_t connect_deadline_ns = 0;  // Connecting: PeerUnreachable after it

  PendingWr* hot = nullptr;  // entries 0..kSqHotEntries-1 (SlotMemory)
  PendingWr* sq = nullptr;   // the rest, kSendQueueDepth - kSqHotEntries (SlotMemory)
  std::uint32_t sq_head = 0;
  std::uint32_t sq_written = 0;
  std::uint32_t sq_tail = 0;
  std::uint32_t write_offset = 0;

  std::byte* rx = nullptr;  // rx_buffer_bytes() (SlotMemory), kept across reuse
  std::size_t rx_begin = 0;
  std::size_t rx_end = 0;
  // Something was once copied into rx (a frame larger than a landing read,
  // or frames a full poll could not hand out): its first pages are
  // committed, so reads go straight into it from then on, one read and no
  // copy where the landing buffer would cost a second read and a copy.
  bool rx_direct = false;

  // A free slot takes socket `fd`, in state Open (accepted) or Connecting
  // (dialled in the background): nothing queued, nothing received. Its
  // generation, memory and deadline are the caller's.
  void start(int socket, ConnState s) noexcept {
    fd = socket;
    state = s;
    want_write = false;
    close_status = Status::Ok;
    sq_head = sq_written = sq_tail = 0;
    write_offset = 0;
    rx_begin = rx_end = 0;
    rx_direct = false;
  }

  std::uint32_t sq_used() const noexcept { return sq_tail - sq_head; }
  PendingWr& sq_at(std::uint32_t i) noexcept {
    const std::uint32_t k = i & (kSendQueueDepth - 1);
    return k < kSqHotEntries ? hot[k] : sq[k - kSqHotEntries];
  }
};

}  // namespace ferry::transport::tcp
