// The client segment ABI: one memfd per attached client, created and sized
// by ferryd, mapped by both sides. Layout, in order, each part aligned:
//
//   SegmentHeader | SQ RingHeader | SQ entries | CQ RingHeader | CQ entries
//   | tx arena (client allocates, daemon reads) | rx arena (daemon allocates,
//   client reads and releases)
//
// The daemon computes the layout from its own configuration and never reads
// sizes back from shared memory; the client reads them from the header after
// checking magic and version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shm/ring.h"
#include "shm/ring_entries.h"

namespace ferry::shm {

inline constexpr std::uint64_t kSegmentMagic = 0x4745535952524546ull;  // "FERRYSEG" little-endian
inline constexpr std::uint32_t kAbiVersion = 3;  // 2: AttachRequest/Reply name an engine; 3: inline deliveries
inline constexpr std::uint64_t kPageSize = 4096;
inline constexpr std::uint64_t kArenaAlign = 64 * 1024;

// Limits the daemon enforces on what a client may request.
inline constexpr std::uint32_t kMinRingEntries = 64;
inline constexpr std::uint32_t kMaxRingEntries = 64 * 1024;
inline constexpr std::uint64_t kMinArenaBytes = 1ull << 20;
inline constexpr std::uint64_t kMaxArenaBytes = 4ull << 30;

// Where each part of the segment lies: written into the header by the
// daemon, read back by the client (SegmentHeader::regions).
struct SegmentRegions {
  std::uint64_t sq_header_offset;
  std::uint64_t sq_entries_offset;
  std::uint64_t cq_header_offset;
  std::uint64_t cq_entries_offset;
  std::uint64_t tx_offset;
  std::uint64_t tx_bytes;
  std::uint64_t rx_offset;
  std::uint64_t rx_bytes;
};
static_assert(sizeof(SegmentRegions) == 64);

struct SegmentHeader {
  std::uint64_t magic;
  std::uint32_t abi_version;
  std::uint32_t header_bytes;  // sizeof(SegmentHeader)
  std::uint64_t segment_bytes;
  std::uint64_t daemon_epoch;  // changes every time ferryd starts
  std::uint32_t client_id;
  std::uint32_t sq_entries;
  std::uint32_t cq_entries;
  std::uint32_t reserved0;
  SegmentRegions regions;
  std::uint64_t max_message_bytes;
  std::uint64_t reserved1[3];
};
static_assert(std::is_standard_layout_v<SegmentHeader>);
static_assert(sizeof(SegmentHeader) == 144);
static_assert(offsetof(SegmentHeader, abi_version) == 8);
static_assert(offsetof(SegmentHeader, segment_bytes) == 16);
static_assert(offsetof(SegmentHeader, daemon_epoch) == 24);
static_assert(offsetof(SegmentHeader, client_id) == 32);
static_assert(offsetof(SegmentHeader, regions.sq_header_offset) == 48);
static_assert(offsetof(SegmentHeader, regions.tx_offset) == 80);
static_assert(offsetof(SegmentHeader, regions.rx_offset) == 96);
static_assert(offsetof(SegmentHeader, max_message_bytes) == 112);

struct SegmentSizes {
  std::uint32_t sq_entries;
  std::uint32_t cq_entries;
  std::uint64_t tx_bytes;
  std::uint64_t rx_bytes;
};

constexpr std::uint64_t align_up(std::uint64_t v, std::uint64_t a) noexcept { return (v + a - 1) / a * a; }

struct SegmentLayout : SegmentRegions {
  std::uint64_t segment_bytes;
};

// Sizes must already be validated (valid_sizes) before calling.
constexpr SegmentLayout compute_layout(const SegmentSizes& s) noexcept {
  SegmentLayout l{};
  std::uint64_t at = kPageSize;  // header page
  l.sq_header_offset = at;
  at += sizeof(RingHeader);
  l.sq_entries_offset = align_up(at, kCacheLine);
  at = l.sq_entries_offset + std::uint64_t{s.sq_entries} * sizeof(SqEntry);
  l.cq_header_offset = align_up(at, kPageSize);
  at = l.cq_header_offset + sizeof(RingHeader);
  l.cq_entries_offset = align_up(at, kCacheLine);
  at = l.cq_entries_offset + std::uint64_t{s.cq_entries} * sizeof(CqEntry);
  l.tx_offset = align_up(at, kArenaAlign);
  l.tx_bytes = align_up(s.tx_bytes, kArenaAlign);
  l.rx_offset = l.tx_offset + l.tx_bytes;
  l.rx_bytes = align_up(s.rx_bytes, kArenaAlign);
  l.segment_bytes = l.rx_offset + l.rx_bytes;
  return l;
}

constexpr bool valid_sizes(const SegmentSizes& s) noexcept {
  return is_power_of_two(s.sq_entries) && is_power_of_two(s.cq_entries) && s.sq_entries >= kMinRingEntries &&
         s.sq_entries <= kMaxRingEntries && s.cq_entries >= kMinRingEntries && s.cq_entries <= kMaxRingEntries &&
         s.tx_bytes >= kMinArenaBytes && s.tx_bytes <= kMaxArenaBytes && s.rx_bytes >= kMinArenaBytes &&
         s.rx_bytes <= kMaxArenaBytes;
}

// True when [offset, offset+length) lies inside [base, base+size); overflow safe.
constexpr bool range_inside(std::uint64_t offset, std::uint64_t length, std::uint64_t base,
                            std::uint64_t size) noexcept {
  return offset >= base && offset - base <= size && length <= size - (offset - base);
}

static_assert(compute_layout({1024, 4096, 1 << 20, 1 << 20}).tx_offset % kArenaAlign == 0);
static_assert(compute_layout({1024, 4096, 1 << 20, 1 << 20}).segment_bytes ==
              compute_layout({1024, 4096, 1 << 20, 1 << 20}).rx_offset + (1 << 20));

}  // namespace ferry::shm
