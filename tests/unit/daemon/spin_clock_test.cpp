#include "daemon/loop/spin_clock.h"

#include <catch2/catch.hpp>

using ferry::daemon::auto_clock_stride;
using ferry::daemon::clocksource_in_user_space;
using ferry::daemon::kSlowClockStride;
using ferry::daemon::SpinClock;

TEST_CASE("spin clock: a fresh reading every turn that is not yielding", "[spin]") {
  SpinClock c(16);
  for (int i = 0; i < 10; ++i) (void)c.now(false);
  CHECK(c.reads() == 10);
}

TEST_CASE("spin clock: while yielding, one reading per stride turns", "[spin]") {
  SpinClock c(16);
  const std::uint64_t first = c.now(false);
  CHECK(c.reads() == 1);
  for (int i = 0; i < 15; ++i) CHECK(c.now(true) == first);  // the stale reading, no clock read
  CHECK(c.reads() == 1);
  const std::uint64_t again = c.now(true);  // the 16th yielding turn reads the clock
  CHECK(c.reads() == 2);
  CHECK(again >= first);
  for (int i = 0; i < 160; ++i) (void)c.now(true);
  CHECK(c.reads() == 12);
  (void)c.now(false);  // work or a wake-up: read at once, whatever the count
  CHECK(c.reads() == 13);
}

TEST_CASE("spin clock: stride 1 (and 0) reads every turn", "[spin]") {
  for (std::uint32_t stride : {0u, 1u}) {
    SpinClock c(stride);
    CHECK(c.stride() == 1);
    for (int i = 0; i < 8; ++i) (void)c.now(true);
    CHECK(c.reads() == 8);
  }
}

TEST_CASE("spin clock: auto stride from the clocksource", "[spin]") {
  CHECK(clocksource_in_user_space("tsc"));
  CHECK(clocksource_in_user_space("kvm-clock"));
  CHECK(clocksource_in_user_space("arch_sys_counter"));
  CHECK_FALSE(clocksource_in_user_space("hpet"));
  CHECK_FALSE(clocksource_in_user_space("acpi_pm"));
  CHECK(auto_clock_stride("tsc") == 1);
  CHECK(auto_clock_stride("") == 1);  // unreadable: assume a fast clock
  CHECK(auto_clock_stride("hpet") == kSlowClockStride);
  CHECK(auto_clock_stride("jiffies") == kSlowClockStride);
}
