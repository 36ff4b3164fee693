// The engine's one time source: monotonic nanoseconds for deadlines and
// idle accounting (steady_clock reads vDSO clock_gettime: no syscall).
#pragma once

#include <chrono>
#include <cstdint>

namespace ferry::daemon {

inline std::uint64_t mono_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace ferry::daemon
