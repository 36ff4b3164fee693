// FERRY_FAULT_ENGINE parsing (engine_fault.h). Start-up only.
#include "daemon/loop/engine_fault.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string>

#include "transport/fault_spec.h"

namespace ferry::daemon {

std::optional<EngineFault> parse_engine_fault(std::string_view spec) noexcept {
  const auto after = transport::parse_fault_count(spec, "forget-call-after=");
  if (!after) return std::nullopt;
  EngineFault f;
  f.forget_call_after = *after;
  return f;
}

void log_fault_injection_state() {
  if constexpr (transport::kFaultInjection) {
    spdlog::info("test build: fault injection compiled in (FERRY_FAULT_* switches work; do not deploy this ferryd)");
  } else {
    for (const std::string_view env : transport::kFaultSwitchEnvs) {
      const char* v = std::getenv(std::string(env).c_str());
      if (v == nullptr || *v == '\0') continue;
      spdlog::warn("{}={} is ignored: this ferryd was built without fault injection (meson -Dfault_injection=true)",
                   env, v);
    }
  }
}

Error engine_fault_from_env(EngineFault* out) {
  if constexpr (!transport::kFaultInjection) return {};  // ferryd logs that it is ignored
  const char* v = std::getenv(kEngineFaultEnv);
  if (v == nullptr || *v == '\0') return {};
  const auto f = parse_engine_fault(v);
  if (!f) {
    return Error::bad_request(std::string(kEngineFaultEnv) + "='" + v +
                              "' is malformed: expected forget-call-after=N (N in 1.." +
                              std::to_string(transport::kMaxFaultAfter) + ")");
  }
  *out = *f;
  return {};
}

}  // namespace ferry::daemon
