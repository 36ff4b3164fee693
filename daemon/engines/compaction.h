// Compacting engines (Snap's "compacting" scheduling): an engine is a unit
// of state, not necessarily a thread. While a daemon's traffic fits one
// core, engine 0's thread runs the turns of the other engines too, so an
// operation that needs two engines (one worker reading two shards placed on
// two engines) wakes no second thread and a second spinner costs nothing;
// when that thread gets busy, the engines it hosts go back to their own
// threads, and the daemon scales as if they had never left.
//
// The engines stay shared-nothing: a hosted engine is run by one thread at
// a time, handed over with a mutex (EngineBaton) and never touched by two.
// Its clients, rings, channels and calls do not move; only the thread that
// turns them does. Decisions (engine_host.cpp):
//
//   - an engine other than 0, about to sleep on its own thread, offers
//     itself to engine 0 (HostInbox) when it was busy less than
//     kCompactPermille of its last window, engine 0's thread less than
//     kJoinPermille with it, and it has been on its own thread for at least
//     kCompactHoldNs since it was last handed back;
//   - engine 0, hosting, hands its busiest hosted engine back to its own
//     thread when its thread was busy more than kExpandPermille of a window
//     (the time in turns that did work, its own and the hosted engines').
//
// The gap between kJoinPermille and kExpandPermille and the hold keep an
// engine from going back and forth. engine-compact off keeps every engine
// on its own thread (config_keys.cpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <utility>

namespace ferry::daemon {

inline constexpr std::uint64_t kCompactWindowNs = 50'000'000;   // busy share measured over 50 ms
inline constexpr std::uint32_t kCompactPermille = 150;          // an engine this idle may be hosted ...
inline constexpr std::uint32_t kJoinPermille = 450;             // ... where both together stay under this
inline constexpr std::uint32_t kExpandPermille = 700;           // a host busier than this gives one back
inline constexpr std::uint32_t kHandBackMinPermille = 50;       // ... if that one did this much of it
inline constexpr std::uint64_t kCompactHoldNs = 1'000'000'000;  // on its own thread at least this long

// The share of a window an engine's thread spent in turns that did work.
class BusyWindow {
 public:
  void add(std::uint64_t ns) noexcept { busy_ns_ += ns; }
  // Whether the window that began at start() has run its length by `now`.
  bool closes(std::uint64_t now) const noexcept { return now - start_ >= kCompactWindowNs; }
  // Ends the window at `now`: its busy share in permille, published to
  // other threads (permille()), and a new window begins.
  std::uint32_t close(std::uint64_t now) noexcept {
    const std::uint64_t span = std::max<std::uint64_t>(1, now - start_);
    const auto p = static_cast<std::uint32_t>(std::min<std::uint64_t>(1000, busy_ns_ * 1000 / span));
    busy_ns_ = 0;
    start_ = now;
    permille_.store(p, std::memory_order_relaxed);
    return p;
  }
  void restart(std::uint64_t now) noexcept {
    busy_ns_ = 0;
    start_ = now;
  }
  // Any thread: the last closed window's share.
  std::uint32_t permille() const noexcept { return permille_.load(std::memory_order_relaxed); }

 private:
  std::uint64_t start_ = 0;
  std::uint64_t busy_ns_ = 0;
  std::atomic<std::uint32_t> permille_{0};
};

// Which thread runs an engine: its own, or the host's. The engine's own
// thread waits in wait_until_back() while the host runs it; the mutex
// orders everything one thread did to the engine before the other's first
// touch.
class EngineBaton {
 public:
  void hand_over() noexcept {
    std::lock_guard lock(m_);
    hosted_ = true;
  }
  void wait_until_back() {
    std::unique_lock lock(m_);
    cv_.wait(lock, [this] { return !hosted_; });
  }
  void hand_back() noexcept {
    {
      std::lock_guard lock(m_);
      hosted_ = false;
    }
    cv_.notify_one();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool hosted_ = false;
};

// Engine 0's inbox: engines offered to it since its last look, a bit each
// (at most 64 engines). Closed when engine 0 stops: later offers fail.
class HostInbox {
 public:
  [[nodiscard]] bool offer(std::uint32_t engine) noexcept {
    std::lock_guard lock(m_);
    if (closed_) return false;
    bits_ |= std::uint64_t{1} << engine;
    pending_.store(true, std::memory_order_release);
    return true;
  }
  // Host thread, each turn: one load.
  bool pending() const noexcept { return pending_.load(std::memory_order_acquire); }
  std::uint64_t take() noexcept {
    std::lock_guard lock(m_);
    pending_.store(false, std::memory_order_relaxed);
    return std::exchange(bits_, 0);
  }
  // Host thread, stopping: the engines offered and not taken.
  std::uint64_t close() noexcept {
    std::lock_guard lock(m_);
    closed_ = true;
    pending_.store(false, std::memory_order_relaxed);
    return std::exchange(bits_, 0);
  }

 private:
  std::mutex m_;
  std::atomic<bool> pending_{false};
  std::uint64_t bits_ = 0;
  bool closed_ = false;
};

// Each engine's state of the above.
struct Compaction {
  BusyWindow window;                     // of the thread this engine runs (its own, or as host)
  std::uint64_t hosted_busy_ns = 0;      // hosted: its busy time in the host's current window
  std::uint64_t hold_until_ns = 0;       // own thread: no offer before this
  std::atomic<std::uint32_t> runner{0};  // index of the engine whose thread runs it (status)
  EngineBaton baton;                     // engines other than 0
  HostInbox inbox;                       // engine 0
  bool woke_transports = false;          // hosted: the host's sleep saw its transports ready
};

}  // namespace ferry::daemon
