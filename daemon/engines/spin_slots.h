// How many of a daemon's engines may spin at once. An engine with nothing
// to do spins a while before it sleeps (loop/spin_policy.h), so an answer
// that comes soon costs no wake-up; with several engines every one of them
// would, and a host with one worker would pay a core per engine for it.
// So an engine takes a slot before it spins and gives it back when it
// sleeps (a busy engine keeps its slot: it will spin next); without one it
// sleeps at once, woken by its events like any sleeping engine. At most
// one engine in eight spins, at least one: a daemon spins no more than a
// single-engine daemon did, unless it has many engines. Touched only when
// an engine starts spinning or sleeps, never per message.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace ferry::daemon {

class SpinSlots {
 public:
  explicit SpinSlots(std::uint32_t engines) noexcept : free_(static_cast<int>(std::max(1u, engines / 8))) {}

  [[nodiscard]] bool take() noexcept {
    int n = free_.load(std::memory_order_relaxed);
    while (n > 0) {
      if (free_.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel, std::memory_order_relaxed)) return true;
    }
    return false;
  }
  void give() noexcept { free_.fetch_add(1, std::memory_order_acq_rel); }
  int available() const noexcept { return free_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int> free_;
};

}  // namespace ferry::daemon
