// FERRY_FAULT_ENGINE parsing (engine_fault.h). Start-up only.
#include "daemon/engine_fault.h"

#include <cstdlib>

#include "transport/fault_spec.h"

namespace ferry::daemon {

std::optional<EngineFault> parse_engine_fault(std::string_view spec) noexcept {
  const auto after = transport::parse_fault_count(spec, "forget-call-after=");
  if (!after) return std::nullopt;
  EngineFault f;
  f.forget_call_after = *after;
  return f;
}

std::optional<std::string> engine_fault_from_env(EngineFault* out) {
  const char* v = std::getenv(kEngineFaultEnv);
  if (v == nullptr || *v == '\0') return std::nullopt;
  const auto f = parse_engine_fault(v);
  if (!f) {
    return std::string(kEngineFaultEnv) + "='" + v + "' is malformed: expected forget-call-after=N (N in 1.." +
           std::to_string(transport::kMaxFaultAfter) + ")";
  }
  *out = *f;
  return std::nullopt;
}

}  // namespace ferry::daemon
