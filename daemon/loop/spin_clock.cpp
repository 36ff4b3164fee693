#include "daemon/loop/spin_clock.h"

#include <fstream>
#include <string_view>

namespace ferry::daemon {

std::string current_clocksource() {
  std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  if (!(in >> name)) return {};
  return name;
}

bool clocksource_in_user_space(const std::string& name) noexcept {
  // The clocksources the x86-64 and arm64 vDSOs read (vclock_mode set).
  for (std::string_view fast : {"tsc", "kvm-clock", "hyperv_clocksource_tsc_page", "arch_sys_counter"}) {
    if (name == fast) return true;
  }
  return false;
}

std::uint32_t auto_clock_stride(const std::string& clocksource) noexcept {
  // Unknown (sysfs unreadable): assume the common, fast case.
  if (clocksource.empty() || clocksource_in_user_space(clocksource)) return 1;
  return kSlowClockStride;
}

}  // namespace ferry::daemon
