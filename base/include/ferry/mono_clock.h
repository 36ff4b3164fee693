// Monotonic nanoseconds, the one time source for deadlines, timers and rate
// limits in every folder (steady_clock reads the vDSO's clock_gettime: no
// system call where the clocksource allows it). Not installed.
#pragma once

#include <chrono>
#include <cstdint>

namespace ferry {

inline std::uint64_t mono_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace ferry
