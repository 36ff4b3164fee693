// engine-yield-watch: whether a spinning engine's yield still pays on its
// CPU. Past engine-yield-after-us an idle engine yields each turn
// (sched_yield), so that the process it waits for, queued behind the spin
// on the same CPU, runs now. The scheduler hands the CPU to whichever task
// is next, though, and a task that does not block soon (a batch job, a
// compiler, even at nice 19) then keeps it for its whole slice,
// milliseconds on CFS, while the answer the engine waits for sits in its
// ring: on the 2-core VM one nice-19 busy loop per CPU made a PS pull's
// P50 4x longer at 1,000 ops/s and 11x at 2,000 (docs/benchmarks/engines.md,
// "A batch job beside the engines"). A sleeping engine has no such cost:
// whatever wakes it (a doorbell, a socket) puts it back on the CPU at once,
// ahead of a task that has used its share.
//
// With the watch on, each yield is timed: one that kept the engine off the
// CPU for kLongNs or more says a task that runs for long shares it. For
// kHoldNs after such a yield the engine does not yield: it spins at most
// engine-spin-us (a busy-polling client on another CPU still gets its
// answer without a wake-up) and then sleeps. After the hold it tries a
// yield again, so a batch job that has ended costs nothing beyond one
// slice per hold. It is off by default: ferry's own processes, more of
// them than cores, also make some yields that long (a few per second at
// 1,000 ops/s on 2 cores), and there sleeping costs more than it saves
// (P50 1.1-1.2x at 1,000 and 3,000 ops/s in the same report). The time of a yield is
// the reading at the next turn when that turn read the clock afresh (a
// spinning engine may read it only every few turns: spin_clock.h); a
// yield whose next turn reused the last reading goes unmeasured.
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
  // Whether the engine must not yield now (a hold is on).
  bool hold(std::uint64_t now) const noexcept { return now < until_; }

 private:
  std::uint64_t since_ = 0;  // the clock reading of the turn that yielded
  std::uint64_t until_ = 0;
};

}  // namespace ferry::daemon
