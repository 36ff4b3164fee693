#include "daemon/loop/yield_watch.h"

#include <catch2/catch.hpp>

using ferry::daemon::YieldWatch;

namespace {
constexpr std::uint64_t kUs = 1000;
constexpr std::uint64_t kT0 = 1'000'000'000;  // any clock reading
}  // namespace

TEST_CASE("yield watch: short yields keep the engine yielding", "[spin]") {
  YieldWatch w;
  std::uint64_t now = kT0;
  for (int i = 0; i < 1000; ++i) {
    w.yielding(now);
    now += 40 * kUs;  // a worker ran for its turn and blocked
    CHECK_FALSE(w.after_yield(now));
    CHECK_FALSE(w.hold(now));
  }
}

TEST_CASE("yield watch: a long yield starts a hold without yields, then yields again", "[spin]") {
  YieldWatch w;
  w.yielding(kT0);
  const std::uint64_t back = kT0 + YieldWatch::kLongNs;  // a batch task kept the CPU for its slice
  CHECK(w.after_yield(back));
  CHECK(w.hold(back));
  CHECK(w.hold(back + YieldWatch::kHoldNs - 1));
  CHECK_FALSE(w.hold(back + YieldWatch::kHoldNs));
  // A yield after the hold that comes back at once: no new hold.
  const std::uint64_t later = back + YieldWatch::kHoldNs + 10 * kUs;
  w.yielding(later);
  CHECK_FALSE(w.after_yield(later + 5 * kUs));
  CHECK_FALSE(w.hold(later + 5 * kUs));
}

TEST_CASE("yield watch: a long yield during a hold extends it", "[spin]") {
  YieldWatch w;
  w.yielding(kT0);
  REQUIRE(w.after_yield(kT0 + 2 * YieldWatch::kLongNs));
  const std::uint64_t t = kT0 + YieldWatch::kHoldNs / 2;
  w.yielding(t);
  REQUIRE(w.after_yield(t + YieldWatch::kLongNs));
  CHECK(w.hold(t + YieldWatch::kLongNs + YieldWatch::kHoldNs - 1));
}

TEST_CASE("yield watch: a turn that reused the last clock reading measures nothing", "[spin]") {
  YieldWatch w;
  w.yielding(kT0);
  CHECK_FALSE(w.after_yield(kT0));  // spin_clock.h: a stale reading equals the yielding turn's
  // The measurement was dropped: a fresh reading much later (a sleep, a
  // long busy turn) is not taken for the yield's length.
  CHECK_FALSE(w.after_yield(kT0 + 10 * YieldWatch::kLongNs));
  CHECK_FALSE(w.hold(kT0 + 10 * YieldWatch::kLongNs));
}

TEST_CASE("yield watch: no yield, nothing to end", "[spin]") {
  YieldWatch w;
  CHECK_FALSE(w.after_yield(kT0));
  CHECK_FALSE(w.hold(kT0));
}
