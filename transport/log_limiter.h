// One log line per interval for events that come in floods (refused
// attaches, accept failures, unauthenticated peers): the first event of a
// quiet spell is logged at once; those that follow within the interval are
// only counted, and the next line (the first event past the interval)
// says how many there were. A flood of N events then costs about
// duration / interval lines instead of N.
//
// Header-only and allocation free; one owner (not thread safe).
#pragma once

#include <cstdint>

#include "ferry/mono_clock.h"

namespace ferry::transport {

class LogLimiter {
 public:
  static constexpr std::uint64_t kDefaultEveryNs = 10'000'000'000;  // 10 s

  constexpr LogLimiter() noexcept = default;
  explicit constexpr LogLimiter(std::uint64_t every_ns) noexcept : every_ns_(every_ns) {}

  // One event at `now_ns` (a steady clock): true when it is to be logged,
  // with `skipped` set to the events counted without a line since the last.
  [[nodiscard]] bool allow(std::uint64_t now_ns, std::uint64_t& skipped) noexcept {
    ++events_;
    if (logged_once_ && now_ns - last_ns_ < every_ns_) {
      ++unlogged_;
      return false;
    }
    logged_once_ = true;
    last_ns_ = now_ns;
    skipped = unlogged_;
    unlogged_ = 0;
    return true;
  }
  [[nodiscard]] bool allow(std::uint64_t& skipped) noexcept { return allow(mono_ns(), skipped); }

  std::uint64_t events() const noexcept { return events_; }

 private:
  std::uint64_t every_ns_ = kDefaultEveryNs;
  std::uint64_t last_ns_ = 0;
  std::uint64_t unlogged_ = 0;
  std::uint64_t events_ = 0;
  bool logged_once_ = false;
};

}  // namespace ferry::transport
