// FERRY_FAULT_ENGINE parsing (engine_fault.h). Start-up only.
#include "daemon/engine_fault.h"

#include <cstdlib>

namespace ferry::daemon {

namespace {
constexpr std::uint64_t kMaxAfter = 1'000'000'000'000ull;
constexpr std::string_view kForget = "forget-call-after=";
}  // namespace

std::optional<EngineFault> parse_engine_fault(std::string_view spec) noexcept {
  if (!spec.starts_with(kForget)) return std::nullopt;
  const std::string_view count = spec.substr(kForget.size());
  if (count.empty() || count.size() > 13) return std::nullopt;
  std::uint64_t v = 0;
  for (const char ch : count) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(ch - '0');
  }
  if (v == 0 || v > kMaxAfter) return std::nullopt;
  EngineFault f;
  f.forget_call_after = v;
  return f;
}

std::optional<std::string> engine_fault_from_env(EngineFault* out) {
  const char* v = std::getenv(kEngineFaultEnv);
  if (v == nullptr || *v == '\0') return std::nullopt;
  const auto f = parse_engine_fault(v);
  if (!f) {
    return std::string(kEngineFaultEnv) + "='" + v + "' is malformed: expected forget-call-after=N (N in 1.." +
           std::to_string(kMaxAfter) + ")";
  }
  *out = *f;
  return std::nullopt;
}

}  // namespace ferry::daemon
