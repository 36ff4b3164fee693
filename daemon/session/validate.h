// First line of defence against an untrusted client: checks one SqEntry
// (already copied out of shared memory) against shm/OPS.md before anything
// acts on it. Pure functions, no state: easy to test for every rejection.
#pragma once

#include <cstdint>
#include <string_view>

#include "shm/ring_entries.h"

namespace ferry::daemon {

enum class [[nodiscard]] Reject : std::uint8_t{
    None,
    UnknownOp,
    UnknownFlags,
    QuietNotAllowed,  // kSqFlagQuiet on anything but ReleaseRx
    ReservedNonZero,
    ZeroHandle,     // Unserve/Close/Send/Call need an id
    NameLength,     // Serve: 1..64 bytes
    TargetLength,   // Open: 1..256 bytes
    PayloadLength,  // Send/Call: 1..max_message; Reply: 0..max_message
    PayloadOutsideTx,
    ResponseOutsideTx,
    ReleaseOutsideRx,
    TimeoutRange,  // Call timeout_ms over shm::kMaxCallTimeoutMs
};
std::string_view to_string(Reject r) noexcept;

inline constexpr std::uint32_t kMaxServiceNameBytes = 64;
inline constexpr std::uint32_t kMaxTargetBytes = 256;

// The client's arenas as the daemon laid them out (never read back from
// shared memory), and the largest payload it accepts.
struct ArenaBounds {
  std::uint64_t tx_offset;
  std::uint64_t tx_bytes;
  std::uint64_t rx_offset;
  std::uint64_t rx_bytes;
  std::uint32_t max_message_bytes;
};

[[nodiscard]] Reject validate_entry(const shm::SqEntry& e, const ArenaBounds& b) noexcept;

// Serve names: 1..64 bytes of [A-Za-z0-9._-].
bool valid_service_name(std::string_view name) noexcept;

}  // namespace ferry::daemon
