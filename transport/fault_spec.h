// The test-only fault switches (FERRY_FAULT_TCP, FERRY_FAULT_RDMA,
// FERRY_FAULT_ENGINE): whether they are compiled in, and their common
// syntax, KIND-after=N, N a decimal count in 1..10^12 (no sign, no spaces,
// nothing after it). Start-up only.
//
// They exist only in a tree configured with `-Dfault_injection=true` (the
// test trees; the project default, and so what a packager's `meson install`
// installs, is off). Off, every switch's armed() is a compile-time false, so
// the hooks on the datapath are dead code the compiler drops, the variables
// are ignored and ferryd says so once at start-up.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "ferry_config.h"

namespace ferry::transport {

inline constexpr bool kFaultInjection = FERRY_FAULT_INJECTION != 0;

// Every switch's environment variable, for the start-up line of a build
// without them.
inline constexpr std::array<std::string_view, 3> kFaultSwitchEnvs = {"FERRY_FAULT_ENGINE", "FERRY_FAULT_TCP",
                                                                     "FERRY_FAULT_RDMA"};

inline constexpr std::uint64_t kMaxFaultAfter = 1'000'000'000'000ull;

// N when `spec` is exactly `key` followed by a valid count, else nullopt.
inline std::optional<std::uint64_t> parse_fault_count(std::string_view spec, std::string_view key) noexcept {
  if (!spec.starts_with(key)) return std::nullopt;
  const std::string_view count = spec.substr(key.size());
  if (count.empty() || count.size() > 13) return std::nullopt;
  std::uint64_t v = 0;
  for (const char ch : count) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(ch - '0');
  }
  if (v == 0 || v > kMaxFaultAfter) return std::nullopt;
  return v;
}

}  // namespace ferry::transport
