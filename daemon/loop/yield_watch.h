// Whether a spinning engine's yield still pays on its CPU. Past
// engine-yield-after-us an idle engine yields each turn (sched_yield), so
// that the process it waits for, queued behind the spin on the same CPU,
// runs now. The scheduler hands the CPU to whichever task is next, though,
// and a task that does not block soon (a batch job, a compiler, even at
// nice 19) then keeps it for its whole slice, milliseconds on CFS, while
// the answer the engine waits for sits in its ring: on the 2-core VM one
// nice-19 CPU hog per core took a PS pull's P50 from 0.3 to 1.2-1.5 ms and
// its P99 from 5 to 14-27 ms (docs/benchmarks/engines.md). A sleeping
// engine has no such cost: whatever wakes it (a doorbell, a socket) puts
// it back on the CPU at once, ahead of a task that has used its share.
//
// So each yield is timed: one that kept the engine off the CPU for
// kLongNs or more says a task that runs for long shares it (the processes
// an engine waits for run for a turn and block again: a worker posting an
// op, a shard answering one). For kHoldNs after such a yield the engine
// sleeps where it would have yielded; then it tries a yield again, so a
// batch job that has ended costs nothing beyond one slice per hold. The
// time of a yield is the first fresh clock reading after it (a spinning
// engine may read the clock only every few turns: spin_clock.h), which can
// only be the reading at the next turn when that turn read the clock
// afresh; a yield whose next turn reused the last reading goes unmeasured.
#pragma once

#include <cstdint>

namespace ferry::daemon {

class YieldWatch {
 public:
  static constexpr std::uint64_t kLongNs = 500'000;      // below a CFS slice, above a worker's turn
  static constexpr std::uint64_t kHoldNs = 100'000'000;  // one lost slice per 100 ms at most

  // The engine yields now; `now` is its turn's clock reading.
  void yielding(std::uint64_t now) noexcept { since_ = now; }
  // The turn after a yield began at `now`. True when the yield was long
  // (the hold starts now).
  bool after_yield(std::uint64_t now) noexcept {
    const std::uint64_t since = since_;
    since_ = 0;
    if (since == 0 || now == since) return false;  // the clock was not read afresh: unmeasured
    const bool lost = now - since >= kLongNs;
    if (lost) until_ = now + kHoldNs;
    return lost;
  }
  // Whether to sleep where the engine would yield.
  bool sleep_instead(std::uint64_t now) const noexcept { return now < until_; }

 private:
  std::uint64_t since_ = 0;  // the clock reading of the turn that yielded
  std::uint64_t until_ = 0;
};

}  // namespace ferry::daemon
