#include "daemon/spin_policy.h"

#include <catch2/catch.hpp>

using ferry::daemon::SpinPolicy;

TEST_CASE("spin budget: long only after work while answers are due", "[spin]") {
  const SpinPolicy p(50, 1000);
  CHECK(p.budget_ns(true, true) == 1'000'000);
  CHECK(p.budget_ns(true, false) == 50'000);  // nothing in flight: an idle daemon sleeps soon
  CHECK(p.budget_ns(false, true) == 50'000);  // woke up and found nothing: no second long spin
  CHECK(p.budget_ns(false, false) == 50'000);
}

TEST_CASE("spin budget: the in-flight spin is never shorter than the idle one", "[spin]") {
  CHECK(SpinPolicy(2000, 0).budget_ns(true, true) == 2'000'000);
  CHECK(SpinPolicy(0, 0).budget_ns(true, true) == 0);
  CHECK(SpinPolicy(0, 100000).budget_ns(true, true) == 100'000'000);
}
