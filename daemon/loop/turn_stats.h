// How long the engine's busy turns take: the engine thread must never wait
// inside a turn (every client and every peer waits with it). A turn that
// did work is timed from its start to the next turn's start (no extra clock
// read); idle turns, which spin or sleep, are not. Counted into buckets and
// a maximum, exposed with the other counters (ferryctl status --json):
// engine_busy_turns, engine_turn_max_us, engine_turns_over_100us, _1ms,
// _10ms. A test compares the buckets before and after a phase.
#pragma once

#include <cstdint>

#include "daemon/counters.h"

namespace ferry::daemon {

class TurnStats {
 public:
  void record(std::uint64_t ns, Counters& c) noexcept {
    bump(c.engine_busy_turns);
    bump(c.engine_busy_ns, ns);  // status: the engine's busy_fraction
    if (ns > 100'000) bump(c.engine_turns_over_100us);
    if (ns > 1'000'000) bump(c.engine_turns_over_1ms);
    if (ns > 10'000'000) bump(c.engine_turns_over_10ms);
    if (ns > max_ns_) {
      max_ns_ = ns;
      c.engine_turn_max_us.store(ns / 1000, std::memory_order_relaxed);
    }
  }

 private:
  std::uint64_t max_ns_ = 0;
};

}  // namespace ferry::daemon
