// Payload of a RailKeys message (docs/protocol.md): a daemon with several
// rails tells its peer, per channel, one of its clients' tx arenas and that
// arena's rkey on each of its rails, so the peer's RDMA READ (rendezvous) or
// WRITE (response buffer) can use the key of whichever of our rails its
// connection reaches, even after the lane moved rails (docs/rails.md).
// Header aux = the rail count n (1..kMaxRailKeys); payload 16 + 4n bytes:
//
//   off   size field
//     0      8 addr     arena start (the sender's virtual address)
//     8      8 length   arena bytes, > 0, addr + length does not wrap
//    16   4 * n rkey[i] the arena's rkey on the sender's rail i (0: none)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/wire/wire_error.h"

namespace ferry::wire {

inline constexpr std::uint32_t kMaxRailKeys = 4;
inline constexpr std::uint32_t kRailKeysFixedBytes = 16;
inline constexpr std::uint32_t kRailKeysMaxBytes = kRailKeysFixedBytes + 4 * kMaxRailKeys;

constexpr std::uint32_t rail_keys_bytes(std::uint32_t rails) noexcept { return kRailKeysFixedBytes + 4 * rails; }

struct RailKeys {
  std::uint64_t addr = 0;
  std::uint64_t length = 0;
  std::uint32_t rails = 0;  // entries of rkey in use
  std::array<std::uint32_t, kMaxRailKeys> rkey{};

  friend bool operator==(const RailKeys&, const RailKeys&) = default;
};

// Writes rail_keys_bytes(rk.rails) bytes (rk.rails <= kMaxRailKeys) and
// returns that count; 0 when `out` is too small or rk.rails is out of range.
std::size_t encode_rail_keys(const RailKeys& rk, std::span<std::byte> out) noexcept;

// `rails` is the header's aux. BadField when it is 0 or above kMaxRailKeys,
// when length is 0 or addr + length wraps; BadLength when in.size() is not
// rail_keys_bytes(rails). `out` is written only on success.
[[nodiscard]] WireError decode_rail_keys(std::span<const std::byte> in, std::uint32_t rails, RailKeys& out) noexcept;

}  // namespace ferry::wire
