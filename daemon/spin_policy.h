// How long the engine spins on an idle stretch before it sleeps (adaptive
// back-off, DESIGN.md "daemon/"). A daemon with nothing in flight spins
// engine-spin-us, so an idle daemon costs ~0 CPU. After a turn that did
// work, while calls or remote operations the engine handled are in flight,
// an answer is due soon: it spins engine-spin-inflight-us instead, sparing
// the round trip the wake-ups of a sleeping engine (a CQ event or doorbell,
// then a scheduler wake-up). A wake-up that finds nothing to do gets the
// short spin again, so a call held for long costs one long spin, not one
// per wake-up.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ferry::daemon {

struct SpinPolicy {
  std::uint64_t idle_ns = 0;      // engine-spin-us
  std::uint64_t inflight_ns = 0;  // engine-spin-inflight-us (never shorter than idle_ns)

  SpinPolicy(std::uint32_t idle_us, std::uint32_t inflight_us) noexcept
      : idle_ns(std::uint64_t{idle_us} * 1000), inflight_ns(std::max(idle_ns, std::uint64_t{inflight_us} * 1000)) {}

  // after_work: the idle stretch began with a turn that did work (not with
  // a wake-up); answers_due: calls or remote operations are in flight.
  std::uint64_t budget_ns(bool after_work, bool answers_due) const noexcept {
    return after_work && answers_due ? inflight_ns : idle_ns;
  }
};

}  // namespace ferry::daemon
