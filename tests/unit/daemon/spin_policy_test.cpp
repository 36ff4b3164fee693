#include "daemon/loop/spin_policy.h"

#include <catch2/catch.hpp>

using ferry::daemon::SpinPolicy;
using ferry::daemon::Transfer;

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

TEST_CASE("spin budget: answers that come later than the in-flight spin turn it off", "[spin]") {
  SpinPolicy p(50, 1000);
  REQUIRE(p.spin_pays());
  // Three slow answers (a server computing 2 ms) are not yet enough ...
  for (int i = 0; i < 3; ++i) p.record_wait(2'000'000);
  CHECK(p.spin_pays());
  CHECK(p.budget_ns(true, true) == 1'000'000);
  // ... the fourth takes the hit rate under two thirds: short spin, sleep.
  p.record_wait(2'000'000);
  CHECK_FALSE(p.spin_pays());
  CHECK(p.budget_ns(true, true) == 50'000);
  CHECK(p.budget_ns(false, false) == 50'000);  // the idle spin is unchanged
  // Quick answers (seen after a sleep as well) bring the long spin back.
  p.record_wait(40'000);
  CHECK_FALSE(p.spin_pays());
  p.record_wait(40'000);
  CHECK(p.spin_pays());
  CHECK(p.budget_ns(true, true) == 1'000'000);
}

TEST_CASE("spin budget: the share of waits the spin catches decides", "[spin]") {
  SpinPolicy edge(50, 1000);
  for (int i = 0; i < 100; ++i) edge.record_wait(1'000'000);
  CHECK(edge.spin_pays());  // a wait as long as the spin counts as caught
  SpinPolicy mostly(50, 1000);
  for (int i = 0; i < 200; ++i) mostly.record_wait(i % 10 == 0 ? 5'000'000 : 30'000);
  CHECK(mostly.spin_pays());  // nine in ten caught
  SpinPolicy half(50, 1000);
  for (int i = 0; i < 200; ++i) half.record_wait(i % 2 == 0 ? 30'000 : 5'000'000);
  CHECK_FALSE(half.spin_pays());  // a quick message, then a long wait: a whole spin wasted per catch
  SpinPolicy after_slow(50, 1000);
  for (int i = 0; i < 50; ++i) after_slow.record_wait(5'000'000);
  for (int i = 0; i < 8; ++i) after_slow.record_wait(30'000);
  CHECK_FALSE(after_slow.spin_pays());
  after_slow.record_wait(30'000);
  CHECK(after_slow.spin_pays());  // nine quick answers in a row after a long slow spell
}

TEST_CASE("spin budget: without an in-flight spin there is nothing to turn off", "[spin]") {
  SpinPolicy p(50, 0);
  for (int i = 0; i < 50; ++i) p.record_wait(10'000'000);
  CHECK(p.budget_ns(true, true) == 50'000);
}

TEST_CASE("spin budget: a held in-flight spin does not turn itself off", "[spin]") {
  SpinPolicy p(50, 1000, true);
  REQUIRE(p.holds());
  CHECK(p.budget_ns(true, true) == SpinPolicy::kHoldNs);  // held until the answer, within the bound
  CHECK(p.budget_ns(true, false) == 50'000);              // nothing in flight: the idle spin, as before
  CHECK(p.budget_ns(false, true) == 50'000);              // a wake-up that found nothing: no second hold
  // Slow answers (a loaded VM, a server computing) leave the hold on ...
  for (int i = 0; i < 100; ++i) p.record_wait(5'000'000);
  CHECK(p.budget_ns(true, true) == SpinPolicy::kHoldNs);
  CHECK_FALSE(p.skipped(Transfer::Small));
  // ... but a bulk transfer in flight gets the adaptive spin, here off.
  CHECK(p.budget_ns(true, true, Transfer::Bulk) == 50'000);
  CHECK(p.skipped(Transfer::Bulk));
  SpinPolicy quick(50, 1000, true);
  CHECK(quick.budget_ns(true, true, Transfer::Bulk) == 1'000'000);  // quick answers: the adaptive long spin
  // A large transfer: no in-flight spin at all, however quick the answers
  // were, and that sleep is the policy's choice, not a skip.
  CHECK(quick.budget_ns(true, true, Transfer::Large) == 50'000);
  CHECK_FALSE(quick.skipped(Transfer::Large));
  CHECK(quick.budget_ns(true, false, Transfer::Large) == 50'000);
  // Without hold the same waits turn the spin off (the old behaviour).
  SpinPolicy adaptive(50, 1000, false);
  CHECK_FALSE(adaptive.holds());
  for (int i = 0; i < 100; ++i) adaptive.record_wait(5'000'000);
  CHECK(adaptive.budget_ns(true, true) == 50'000);
}
