// Admission of accepted connections to a transport's slot table (the tcp
// transport's listener, the rdma transport's connection manager): what
// keeps unauthenticated peers from taking the slots that dials and working
// channels need (docs/security.md, "Idle connections").
//
// An accepted connection is *unvouched* until its owner vouches for it
// (Transport::vouch: a channel took it, after its proof when auth is on),
// and *silent* until its first complete message arrives. The rules:
//   - at most budget = max_connections - reserve unvouched connections at
//     once: the reserve stays for outgoing dials and vouched connections;
//   - at most per_source unvouched connections from one address;
//   - a silent connection is closed hello_timeout_ms after its accept;
//   - at either cap, the oldest silent connection (of that source, then of
//     any) makes room for the new one, so a flood of idle connections can
//     delay a real peer by one of its own round trips, not lock it out.
// Refusals, evictions and timeouts are counted, and logged at most once per
// kLogEveryNs with the counts since the last line.
//
// Control path (accept, close, a timer): no allocation after construction.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include <sys/socket.h>

#include "transport/attention_mask.h"

namespace ferry::transport {

// The counts the owner publishes (daemon status JSON counters).
struct AcceptGuardStats {
  std::uint64_t refused = 0;    // closed at accept: no room and nothing to evict
  std::uint64_t evicted = 0;    // silent connections closed to make room for a new one
  std::uint64_t timed_out = 0;  // silent connections closed at hello_timeout_ms
};

struct AcceptGuardConfig {
  std::uint32_t max_connections = 64;
  std::uint32_t reserve = 16;  // slots unvouched connections never take
  std::uint32_t per_source = 16;
  std::uint32_t hello_timeout_ms = 2000;
};

class AcceptGuard {
 public:
  // How many unvouched connections a table of `max_connections` admits at
  // once: all but `reserve`, and never more than half reserved, so a tiny
  // table still accepts (at least 1).
  static constexpr std::uint32_t unvouched_budget(std::uint32_t max_connections, std::uint32_t reserve) noexcept {
    const std::uint32_t kept = reserve < max_connections / 2 ? reserve : max_connections / 2;
    return max_connections - kept == 0 ? 1 : max_connections - kept;
  }

  // A source address: IPv4 as its v4-mapped IPv6 form.
  using Source = std::array<std::uint8_t, 16>;
  static Source source_of(const sockaddr_storage& ss) noexcept;

  // `what` names the listener in the log line ("peer listener").
  AcceptGuard(const AcceptGuardConfig& cfg, const char* what);

  enum class Verdict : std::uint8_t { Admit, Evict, Refuse };
  struct Decision {
    Verdict verdict = Verdict::Refuse;
    std::uint32_t victim = 0;  // Evict: the slot to close first (then Admit)
  };
  // May a new connection from `src` be admitted? `have_slot`: the table has
  // a free slot (without one: Refuse, nothing evicted). Evict names the silent slot to close; the caller closes it
  // (which forgets it)  // and asks again.
  [[nodiscard]] Decision admit(const Source& src, bool have_slot) const noexcept;
  // The caller closed a new connection it had no room for.
  void refused(std::uint64_t now_ns) noexcept;
  // The connection in `slot` was accepted from `src` (after Admit).
  void accepted(std::uint32_t slot, const Source& src, std::uint64_t now_ns) noexcept;
  // Its first complete frame arrived: no deadline any more.
  void spoke(std::uint32_t slot) noexcept {
    if (!silent_[slot]) return;
    silent_[slot] = false;
    --silent_n_;
  }
  // The owner took it: it leaves the unvouched counts.
  void vouch(std::uint32_t slot) noexcept;
  // The slot closed, for whatever reason (idempotent).
  void forget(std::uint32_t slot) noexcept;
  void evicted() noexcept { ++stats_.evicted; }
  // Sets in `out` the silent slots past their deadline (the caller closes
  // them and forgets each); counts them. Returns how many, 0 when none.
  template <std::uint32_t N>
  std::uint32_t expired(std::uint64_t now_ns, AttentionMask<N>& out) noexcept {
    const std::uint64_t limit = std::uint64_t{cfg_.hello_timeout_ms} * 1'000'000;
    std::uint32_t n = 0;
    for (std::uint32_t i = 0; i < cfg_.max_connections && i < N; ++i) {
      if (!silent_[i] || now_ns - accepted_ns_[i] < limit) continue;
      out.set(i);
      ++n;
    }
    if (n != 0) {
      stats_.timed_out += n;
      maybe_log(now_ns);
    }
    return n;
  }
  // When expired() next has something to say; 0: no silent connection.
  std::uint64_t next_deadline_ns() const noexcept;
  // One rate-limited line with the counts since the last one.
  void maybe_log(std::uint64_t now_ns) noexcept;

  bool any_silent() const noexcept { return silent_n_ != 0; }
  const AcceptGuardStats& stats() const noexcept { return stats_; }
  std::uint32_t unvouched() const noexcept { return unvouched_; }

 private:
  static constexpr std::uint64_t kLogEveryNs = 10'000'000'000;
  std::uint32_t from_source(const Source& src) const noexcept;
  // The oldest silent unvouched slot (of `src` when given), or -1.
  int oldest_silent(const Source* src) const noexcept;

  AcceptGuardConfig cfg_;
  const char* what_;
  const std::uint32_t budget_;
  std::uint32_t unvouched_ = 0;
  std::uint32_t silent_n_ = 0;
  std::unique_ptr<bool[]> tracked_;  // accepted and not vouched
  std::unique_ptr<bool[]> silent_;
  std::unique_ptr<Source[]> source_;
  std::unique_ptr<std::uint64_t[]> accepted_ns_;
  AcceptGuardStats stats_;
  AcceptGuardStats logged_;  // what the last log line covered
  std::uint64_t last_log_ns_ = 0;
};

}  // namespace ferry::transport
