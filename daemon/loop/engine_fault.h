// Test-only fault injection in the engine, compiled in only with
// -Dfault_injection=true (transport/fault_spec.h) and off unless ferryd's
// environment sets FERRY_FAULT_ENGINE (tests/fault/test_lost_answer.cpp does):
//
//   FERRY_FAULT_ENGINE=forget-call-after=N
//
// The Nth eager remote Call (wire type Call) that arrives at this daemon is
// forgotten: not delivered, not timed, never answered, as a daemon with a bug
// would lose it. The lanes stay reliable (the message was received and is
// acknowledged), so only the calling daemon's answer backstop (timeout +
// 2 x peer-timeout-ms + 1 s, Deadlines::backstop) can notice. Fires once.
// N: 1..10^12. Anything else makes ferryd refuse to start (exit 2) naming
// the variable and the syntax; when set, ferryd logs that it is armed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ferry/error.h"
#include "transport/fault_spec.h"

namespace ferry::daemon {

inline constexpr const char* kEngineFaultEnv = "FERRY_FAULT_ENGINE";

struct EngineFault {
  std::uint64_t forget_call_after = 0;  // 0: off
  std::uint64_t calls_seen = 0;
  bool fired = false;

  bool armed() const noexcept {
    if constexpr (!transport::kFaultInjection) return false;
    return forget_call_after != 0 && !fired;
  }
  // Counts one arriving remote Call; true for the one to forget.
  bool forget_this_call() noexcept {
    if constexpr (!transport::kFaultInjection) return false;
    if (!armed() || ++calls_seen < forget_call_after) return false;
    fired = true;
    return true;
  }
};

// Parses a FERRY_FAULT_ENGINE value; nullopt when malformed.
[[nodiscard]] std::optional<EngineFault> parse_engine_fault(std::string_view spec) noexcept;

// One start-up line: in a build with fault injection, that it is a test
// build; without it, a warning for each FERRY_FAULT_* variable that is set
// (it does nothing).
void log_fault_injection_state();

// Reads FERRY_FAULT_ENGINE: off when unset or empty, and always off in a
// build without fault injection. On a malformed value returns BadRequest
// with the message (and leaves *out alone).
[[nodiscard]] Error engine_fault_from_env(EngineFault* out);

}  // namespace ferry::daemon
