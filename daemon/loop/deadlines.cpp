#include "daemon/loop/deadlines.h"

#include <algorithm>
#include <climits>

#include "ferry/mono_clock.h"

namespace ferry::daemon {

Deadlines::Deadlines(std::uint32_t delivery_timeout_ms, std::uint32_t peer_timeout_ms) noexcept
    : delivery_timeout_ns_(std::uint64_t{delivery_timeout_ms} * 1'000'000),
      backstop_grace_ns_((2 * std::uint64_t{peer_timeout_ms} + 1000) * 1'000'000) {}

std::uint64_t Deadlines::after(std::uint32_t timeout_ms) noexcept {
  if (timeout_ms == 0) return 0;  // no clock read for calls without one (and for every Send)
  // A fresh reading, not the turn's: the turn's may be older than the
  // request (read before the ring was drained, or reused over idle turns
  // by SpinClock), and the timeout would then end before it had passed.
  const std::uint64_t at = fresh() + std::uint64_t{timeout_ms} * 1'000'000;
  note(at);
  return at;
}

std::uint64_t Deadlines::waiting(std::uint64_t call_deadline_ns) const noexcept {
  const std::uint64_t delivery = now() + delivery_timeout_ns_;
  return call_deadline_ns != 0 ? std::min(delivery, call_deadline_ns) : delivery;
}

std::uint64_t Deadlines::backstop(std::uint32_t timeout_ms) noexcept {
  if (timeout_ms == 0) return 0;
  const std::uint64_t at = now() + std::uint64_t{timeout_ms} * 1'000'000 + backstop_grace_ns_;
  note(at);
  return at;
}

void Deadlines::note(std::uint64_t at_ns) noexcept {
  if (at_ns != 0) next_ns_ = std::min(next_ns_, at_ns);
}

void Deadlines::swept(std::uint64_t next_ns) noexcept {
  last_sweep_ns_ = now();
  next_ns_ = next_ns;
}

int Deadlines::ms_until_due(std::uint64_t now_ns) const noexcept {
  if (next_ns_ == kNone) return -1;
  const std::uint64_t at = std::max(next_ns_, last_sweep_ns_ + kSweepNs);
  if (at <= now_ns) return 0;
  return static_cast<int>(std::min<std::uint64_t>((at - now_ns + 999'999) / 1'000'000, INT_MAX));
}

}  // namespace ferry::daemon
