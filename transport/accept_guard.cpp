// AcceptGuard: the admission rules for accepted connections (the header).
#include "transport/accept_guard.h"

#include <netinet/in.h>

#include <cstring>

#include <spdlog/spdlog.h>

namespace ferry::transport {

AcceptGuard::Source AcceptGuard::source_of(const sockaddr_storage& ss) noexcept {
  Source s{};
  if (ss.ss_family == AF_INET6) {
    std::memcpy(s.data(), &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, 16);
  } else if (ss.ss_family == AF_INET) {
    s[10] = 0xFF;
    s[11] = 0xFF;
    std::memcpy(s.data() + 12, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, 4);
  }
  return s;
}

AcceptGuard::AcceptGuard(const AcceptGuardConfig& cfg, const char* what)
    : cfg_(cfg),
      what_(what),
      budget_(unvouched_budget(cfg.max_connections, cfg.reserve)),
      tracked_(new bool[cfg.max_connections]()),
      silent_(new bool[cfg.max_connections]()),
      source_(new Source[cfg.max_connections]()),
      accepted_ns_(new std::uint64_t[cfg.max_connections]()) {}

std::uint32_t AcceptGuard::from_source(const Source& src) const noexcept {
  std::uint32_t n = 0;
  for (std::uint32_t i = 0; i < cfg_.max_connections; ++i) n += tracked_[i] && source_[i] == src ? 1 : 0;
  return n;
}

int AcceptGuard::oldest_silent(const Source* src) const noexcept {
  int best = -1;
  for (std::uint32_t i = 0; i < cfg_.max_connections; ++i) {
    if (!tracked_[i] || !silent_[i] || (src != nullptr && source_[i] != *src)) continue;
    if (best < 0 || accepted_ns_[i] < accepted_ns_[static_cast<std::uint32_t>(best)]) best = static_cast<int>(i);
  }
  return best;
}

AcceptGuard::Decision AcceptGuard::admit(const Source& src, bool have_slot) const noexcept {
  Decision d;
  // An evicted slot frees only once its Closed is reported (after this
  // accept batch): with no free slot now, evicting would close a
  // connection and still refuse this one.
  if (!have_slot) return d;
  int victim = -1;
  if (from_source(src) >= cfg_.per_source) {
    victim = oldest_silent(&src);
  } else if (unvouched_ >= budget_) {
    victim = oldest_silent(nullptr);
  } else {
    d.verdict = Verdict::Admit;
    return d;
  }
  if (victim < 0) return d;
  d.verdict = Verdict::Evict;
  d.victim = static_cast<std::uint32_t>(victim);
  return d;
}

void AcceptGuard::refused(std::uint64_t now_ns) noexcept {
  ++stats_.refused;
  maybe_log(now_ns);
}

void AcceptGuard::accepted(std::uint32_t slot, const Source& src, std::uint64_t now_ns) noexcept {
  if (!tracked_[slot]) ++unvouched_;
  if (!silent_[slot]) ++silent_n_;
  tracked_[slot] = true;
  silent_[slot] = true;
  source_[slot] = src;
  accepted_ns_[slot] = now_ns;
}

void AcceptGuard::vouch(std::uint32_t slot) noexcept {
  if (tracked_[slot]) --unvouched_;
  spoke(slot);
  tracked_[slot] = false;
}

void AcceptGuard::forget(std::uint32_t slot) noexcept { vouch(slot); }

std::uint64_t AcceptGuard::next_deadline_ns() const noexcept {
  std::uint64_t next = 0;
  for (std::uint32_t i = 0; i < cfg_.max_connections; ++i) {
    if (!silent_[i]) continue;
    const std::uint64_t d = accepted_ns_[i] + std::uint64_t{cfg_.hello_timeout_ms} * 1'000'000;
    if (next == 0 || d < next) next = d;
  }
  return next;
}

void AcceptGuard::maybe_log(std::uint64_t now_ns) noexcept {
  if (last_log_ns_ != 0 && now_ns - last_log_ns_ < kLogEveryNs) return;
  const std::uint64_t refused = stats_.refused - logged_.refused;
  const std::uint64_t evicted = stats_.evicted - logged_.evicted;
  const std::uint64_t timed_out = stats_.timed_out - logged_.timed_out;
  if (refused + evicted + timed_out == 0) return;
  last_log_ns_ = now_ns;
  logged_ = stats_;
  spdlog::warn(
      "{}: {} connections refused (no room), {} silent ones closed for a new one, {} closed without a "
      "first message within {} ms; {} unauthenticated open (at most {}, {} per source)",
      what_, refused, evicted, timed_out, cfg_.hello_timeout_ms, unvouched_, budget_, cfg_.per_source);
}

}  // namespace ferry::transport
