// How often a spinning engine reads the clock. Each engine turn reads the
// monotonic clock (deadlines, spin budgets). On hardware that is a vDSO read
// of the TSC, a few nanoseconds. In a guest without a usable TSC (qemu TCG
// offers the HPET) clock_gettime is a system call and the HPET read an
// emulated device access: a held spin made one clock_gettime per idle turn
// beside its yield, ~850 syscalls per 64 B call per daemon together; with
// a stride of 16, 25 clock reads per call were left (docs/benchmarks/soft-roce-counts.md). While
// the engine is in the yielding part of a spin, nothing it waits for is due
// on a timer shorter than a few turns, so it reads the clock once per
// `stride` idle turns and reuses the last reading in between; the turn
// after one with work, and every turn before the engine starts yielding,
// reads it afresh. So the first turn to find work after idle ones may run
// on a reading up to `stride` turns old: deadlines found late, and a
// call's timeout reads its own (loop/deadlines.h).
#pragma once

#include <cstdint>
#include <string>

#include "ferry/mono_clock.h"

namespace ferry::daemon {

class SpinClock {
 public:
  explicit SpinClock(std::uint32_t stride) noexcept : stride_(stride == 0 ? 1 : stride) {}

  // The time for this turn. `yielding`: the previous turn found nothing and
  // the engine had been idle past engine-yield-after-us.
  std::uint64_t now(bool yielding) noexcept {
    if (!yielding || ++stale_ >= stride_) {
      stale_ = 0;
      last_ = mono_ns();
      ++reads_;
    }
    return last_;
  }
  std::uint32_t stride() const noexcept { return stride_; }
  std::uint64_t reads() const noexcept { return reads_; }

 private:
  std::uint32_t stride_;
  std::uint32_t stale_ = 0;
  std::uint64_t last_ = 0;
  std::uint64_t reads_ = 0;
};

// The kernel's current clocksource (sysfs), e.g. "tsc" or "hpet"; empty when
// it cannot be read.
std::string current_clocksource();
// Whether user space reads that clocksource without a system call (vDSO).
bool clocksource_in_user_space(const std::string& name) noexcept;
// engine-clock-stride 0 (auto): 1 for a user-space clock (or an unknown
// one), kSlowClockStride otherwise.
inline constexpr std::uint32_t kSlowClockStride = 16;
std::uint32_t auto_clock_stride(const std::string& clocksource) noexcept;

}  // namespace ferry::daemon
