// What a listener does when accept() fails for want of resources (EMFILE,
// ENFILE, ENOBUFS, ENOMEM): the pending connection stays queued, so the
// listening socket stays readable and an immediate re-arm would spin the
// control thread at 100 % and write a log line per turn. Instead the
// listener waits (100 ms, doubling to 2 s while the failures go on) and the
// failure is logged at most once every 10 s, with the count of failures
// since the last line. Control (asio) thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "ferry/retry_pause.h"

namespace ferry::daemon {

class AcceptBackoff {
 public:
  static constexpr std::chrono::seconds kLogEvery{10};

  explicit AcceptBackoff(std::string listener) : listener_(std::move(listener)) {}

  // Whether `err` (an accept errno) means "out of resources, wait".
  static bool is_resource_error(int err) noexcept;

  // Records a failure; returns how long the listener waits before it tries
  // again. Logs (warn) at most once per kLogEvery.
  [[nodiscard]] std::chrono::milliseconds on_failure(int err);
  // A connection was accepted: the next failure waits 100 ms again.
  void on_success() noexcept { wait_.reset(); }

  std::uint64_t failures() const noexcept { return failures_; }

 private:
  std::string listener_;
  RetryPause wait_;
  std::chrono::steady_clock::time_point last_log_{};
  std::uint64_t failures_ = 0;
  std::uint64_t unlogged_ = 0;
};

}  // namespace ferry::daemon
