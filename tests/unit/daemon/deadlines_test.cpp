#include "daemon/loop/deadlines.h"

#include <catch2/catch.hpp>

using ferry::mono_ns;
using ferry::daemon::Deadlines;

namespace {
constexpr std::uint64_t kMs = 1'000'000;
}  // namespace

TEST_CASE("deadlines: a call's timeout counts from a fresh reading, not the turn's", "[deadlines]") {
  Deadlines d(1000, 1000);
  const std::uint64_t before = mono_ns();
  d.start_turn(before - 50 * kMs);  // a turn clock 50 ms old (reused over idle turns)
  const std::uint64_t at = d.after(500);
  CHECK(at >= before + 500 * kMs);  // never before the timeout has passed
  CHECK(at <= mono_ns() + 500 * kMs);
  CHECK_FALSE(d.due());
}

TEST_CASE("deadlines: no timeout, no deadline", "[deadlines]") {
  Deadlines d(1000, 1000);
  d.start_turn(mono_ns());
  CHECK(d.after(0) == 0);
  CHECK(d.ms_until_due(mono_ns()) == -1);
}

TEST_CASE("deadlines: expiry compares with the turn's clock, so it is found late, never early", "[deadlines]") {
  Deadlines d(1000, 1000);
  const std::uint64_t at = d.after(10);
  d.start_turn(at - 1);
  CHECK_FALSE(d.due());
  d.start_turn(at);
  CHECK(d.due());
}
