// What handing an operation to its receiver came to, on the datapath: done,
// blocked (no room at the receiver or in a send window: the op waits and is
// offered again), or failed with a status the op then completes with. A
// small value returned in registers, instead of a flag plus an out-parameter.
#pragma once

#include <cstdint>

#include "ferry/status.h"

namespace ferry::daemon {

struct [[nodiscard]] Outcome {
  enum class Kind : std::uint8_t { Done, Blocked, Failed };
  Kind kind = Kind::Done;
  Status status = Status::Ok;  // Failed: why

  static constexpr Outcome done() noexcept { return {Kind::Done, Status::Ok}; }
  static constexpr Outcome blocked() noexcept { return {Kind::Blocked, Status::Ok}; }
  static constexpr Outcome failed(Status why) noexcept { return {Kind::Failed, why}; }
  constexpr bool is_done() const noexcept { return kind == Kind::Done; }
  constexpr bool is_blocked() const noexcept { return kind == Kind::Blocked; }
  constexpr bool is_failed() const noexcept { return kind == Kind::Failed; }
};

}  // namespace ferry::daemon
