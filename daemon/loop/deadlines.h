// The engine's clock and its deadlines. The clock is read once at the top
// of each turn (start_turn): the turn's deadlines and timestamps take it
// instead of reading the clock again (a syscall where the clocksource has
// no vDSO path, as in the test VM: six reads a turn were ~15 us there). It
// is stale by at most one turn (by up to engine-clock-stride idle turns
// where SpinClock reuses a reading); before the first turn it reads the
// clock. Expiry compares with it, so a deadline is found late, never early;
// a call's timeout (after()) reads the clock afresh, so it never starts early.
//
// Deadlines are not timers: a component notes the earliest time it must
// look again (note()), and the engine sweeps the components that keep
// deadlines when the earliest has passed, at most once per kSweepNs
// (due(), then swept() with the next earliest). No per-call timer, no
// allocation. What each deadline means: serve/calls.h (a call's timeout at
// the server's daemon), remote/remote_sender.h (the caller's backstop).
// Engine thread only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/mono_clock.h"

namespace ferry::daemon {

// What a component's sweep of its deadlines found: how many expired (work
// done this turn) and the earliest deadline still ahead.
struct Sweep {
  std::size_t expired = 0;
  std::uint64_t next_ns = ~std::uint64_t{0};
  void merge(const Sweep& o) noexcept {
    expired += o.expired;
    if (o.next_ns < next_ns) next_ns = o.next_ns;
  }
};

class Deadlines {
 public:
  static constexpr std::uint64_t kNone = ~std::uint64_t{0};
  static constexpr std::uint64_t kSweepNs = 5'000'000;  // deadline granularity

  // `delivery_timeout_ms`: how long a delivery may wait for room at its
  // receiver; `peer_timeout_ms`: the peers' liveness bound (backstops).
  Deadlines(std::uint32_t delivery_timeout_ms, std::uint32_t peer_timeout_ms) noexcept;

  void start_turn(std::uint64_t now_ns) noexcept { turn_ns_ = now_ns; }
  std::uint64_t now() const noexcept { return turn_ns_ != 0 ? turn_ns_ : mono_ns(); }
  // The clock read afresh (after()): the monotonic clock, or *simulated
  // where a test drives the engine's time itself (use_clock).
  std::uint64_t fresh() const noexcept { return simulated_ != nullptr ? *simulated_ : mono_ns(); }
  void use_clock(const std::uint64_t* simulated) noexcept { simulated_ = simulated; }

  // A promise of "not before": the clock read now (not the turn's, which
  // may predate the request) + timeout (0: none, and no clock read), noted
  // as a deadline. One clock read per call that has a timeout.
  std::uint64_t after(std::uint32_t timeout_ms) noexcept;
  // How long a delivery may wait for room at its receiver: the delivery
  // timeout, or a Call's own deadline if that is earlier (parked, staged).
  std::uint64_t waiting(std::uint64_t call_deadline_ns) const noexcept;
  // When a calling daemon gives up on a peer that never answers a call of
  // `timeout_ms`: timeout + 2 x peer-timeout + 1 s (0: no timeout, none).
  std::uint64_t backstop(std::uint32_t timeout_ms) noexcept;
  void note(std::uint64_t at_ns) noexcept;  // 0: none
  std::uint64_t delivery_timeout_ns() const noexcept { return delivery_timeout_ns_; }

  // Whether a sweep is due now; swept() records it and the next earliest.
  bool due() const noexcept {
    if (next_ns_ == kNone) return false;  // the common case: a load and a compare
    const std::uint64_t t = now();
    return t >= next_ns_ && t >= last_sweep_ns_ + kSweepNs;
  }
  void swept(std::uint64_t next_ns) noexcept;
  // Milliseconds until the next sweep is due (-1: nothing noted), for sleeping.
  int ms_until_due(std::uint64_t now_ns) const noexcept;

 private:
  std::uint64_t delivery_timeout_ns_;
  std::uint64_t backstop_grace_ns_;
  std::uint64_t turn_ns_ = 0;
  std::uint64_t next_ns_ = kNone;
  std::uint64_t last_sweep_ns_ = 0;
  const std::uint64_t* simulated_ = nullptr;
};

}  // namespace ferry::daemon
