// The test-only fault switches' common syntax (FERRY_FAULT_TCP,
// FERRY_FAULT_RDMA, FERRY_FAULT_ENGINE): KIND-after=N, N a decimal count in
// 1..10^12 (no sign, no spaces, nothing after it). Start-up only.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ferry::transport {

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
