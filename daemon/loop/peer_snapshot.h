// The channel table as the control thread sees it (`ferryctl peers`,
// status): a copy the engine publishes a few times a second, on every
// channel state change, and on request. A request waits for the engine's
// next turn (at most kWaitMs), so counters shown right after traffic
// include it; a stalled engine costs the caller kWaitMs and yields the last
// published copy. The lock is taken at control rate only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "daemon/peer/channel_manager.h"

namespace ferry::daemon {

class PeerSnapshot {
 public:
  static constexpr int kWaitMs = 100;
  static constexpr std::uint64_t kPublishNs = 200'000'000;  // periodic refresh

  // Control thread: asks for a fresh copy (`wake` wakes the engine) and waits for it.
  template <typename Wake>
  std::vector<peer::PeerInfo> request(Wake&& wake) const;

  // Engine thread: whether a copy is due now (asked for, periodic, forced).
  [[nodiscard]] bool due(std::uint64_t now_ns, bool force) const noexcept {
    if (force || now_ns >= next_ns_) return true;
    // One acquire load per turn; done_ is only written by this thread.
    return asked_.load(std::memory_order_acquire) != done_;
  }
  // Engine thread: publishes `fresh` and answers the requests seen so far.
  void publish(std::vector<peer::PeerInfo>&& fresh, std::uint64_t now_ns);

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<peer::PeerInfo> copy_;
  mutable std::atomic<std::uint64_t> asked_{0};
  std::uint64_t done_ = 0;  // guarded by mu_: the last request answered
  std::uint64_t next_ns_ = 0;
};

template <typename Wake>
std::vector<peer::PeerInfo> PeerSnapshot::request(Wake&& wake) const {
  const std::uint64_t want = asked_.fetch_add(1, std::memory_order_acq_rel) + 1;
  wake();
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(kWaitMs), [&] { return done_ >= want; });
  return copy_;
}

}  // namespace ferry::daemon
