// The transports' timer for deadlines (a silent accepted connection's, the
// end of a tcp accept pause): a timerfd on CLOCK_MONOTONIC set to an
// absolute time of ferry::mono_ns(), which reads the same clock
// (steady_clock is CLOCK_MONOTONIC on Linux), so no now() is needed.
#pragma once

#include <sys/timerfd.h>

#include <cstdint>
#include <ctime>

namespace ferry::transport {

// Fires timerfd `fd` at `at_ns`; 0 disarms it. A failure (a bad fd) leaves
// it as it was.
inline void arm_timer_at(int fd, std::uint64_t at_ns) noexcept {
  itimerspec its{};
  if (at_ns != 0) {
    its.it_value.tv_sec = static_cast<time_t>(at_ns / 1'000'000'000);
    its.it_value.tv_nsec = static_cast<long>(at_ns % 1'000'000'000);
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;  // all 0 would disarm
  }
  (void)timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, nullptr);
}

}  // namespace ferry::transport
