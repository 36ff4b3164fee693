// The attached clients as the engine sees them: their sessions, the order
// the engine polls them in, their completion queues, and the sessions kept
// after detach while work requests or peers may still reach their memory.
// Engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "daemon/counters.h"
#include "daemon/session/client_session.h"
#include "daemon/session/zero_copy.h"
#include "ferry_config.h"
#include "shm/ring_entries.h"
#include "shm/segment_layout.h"

namespace ferry::daemon {

// Entries taken from one client's SQ per turn (dispatch.h). The CQ bound
// depends on it: a batch is taken only while its OpDones fit the CQ.
inline constexpr std::uint32_t kSqBatch = 32;
static_assert(kSqBatch <= shm::kMinRingEntries, "a batch never exceeds the smallest ring");

// Where the completions of shadows go (engines/forwarder.h): back to the
// engine of the client's own session, which posts them.
class ShadowSink {
 public:
  virtual void shadow_done(const ClientSession& shadow, const shm::CqEntry& entry) noexcept = 0;
  // A shadow is gone for good: nothing of this engine names its memory.
  virtual void shadow_freed(const ClientSession& shadow) noexcept = 0;

 protected:
  ~ShadowSink() = default;
};

class Sessions {
 public:
  Sessions(Counters& counters, std::size_t max_clients);
  ~Sessions();
  Sessions(const Sessions&) = delete;
  Sessions& operator=(const Sessions&) = delete;

  ClientSession* find(std::uint32_t id) noexcept;
  const std::vector<ClientSession*>& all() const noexcept { return order_; }
  bool empty() const noexcept { return order_.empty(); }
  void add(std::unique_ptr<ClientSession> s);
  // A shadow of another engine's client (not polled: it has no rings here).
  void add_shadow(std::unique_ptr<ClientSession> s);
  void set_shadow_sink(ShadowSink* sink) noexcept { shadow_sink_ = sink; }
  // A completion of a forwarded op, from the engine that ran it: posted to
  // the client if it is still here (else dropped: it detached).
  void post_done(std::uint32_t client, const shm::CqEntry& entry) noexcept;
  // An engine freed its shadow of `client` (ClientSession::shadow_refs).
  void shadow_freed(std::uint32_t client) noexcept;
  // Forgets a detached client: its segment is unmapped (and its MR
  // deregistered) now, or once the WRs and peer accesses that name its
  // memory have ended (zero_copy.h).
  void remove(std::uint32_t id);

  // WRs that name a client's memory (eager sends from its tx arena, READs
  // into its rx arena, replies from it): each is tracked in a slot, so a
  // detached session outlives them. track_wr returns the tag to post the WR
  // with (0: every slot busy, the caller must not post); wr_done takes it
  // back and returns the op's own tag (wr_tag.h).
  bool can_track_wr() const noexcept { return zero_copy_.available(); }
  [[nodiscard]] std::uint64_t track_wr(ClientSession& c, std::uint64_t inner_tag) noexcept;
  [[nodiscard]] std::uint64_t wr_done(std::uint64_t tag) noexcept;
  // A peer may READ or WRITE this client's memory until its op is answered
  // (RemoteOp::exposed): hold() / release_hold(), by client id.
  void hold(ClientSession& c) noexcept { ++c.remote_holds; }
  void release_hold(std::uint32_t id) noexcept;

  // Completions. Never dropped: what does not fit a client's CQ goes to its
  // private overflow queue (in order), drained before anything newer.
  void post(ClientSession& c, const shm::CqEntry& entry) noexcept;
  void complete(ClientSession& c, shm::Op op, std::uint64_t user_data, Status status, std::uint32_t handle = 0,
                std::uint32_t length = 0) noexcept;
  // The same for a client that may have gone meanwhile (then nothing).
  void complete(std::uint32_t client, shm::Op op, std::uint64_t user_data, Status status,
                std::uint32_t length = 0) noexcept;
  // A delivery may be posted now (CQ room, nothing overflowing).
  bool can_deliver(ClientSession& c) noexcept { return c.overflow.empty() && c.cq.has_room(1); }
  // Inline deliveries (shm::kCqFlagInline): whether one of `length` bytes
  // may go now, taking it from the client's window: small enough, room in
  // the CQ for it and its payload, and fewer than the window unreleased.
  // Only after can_deliver(); when true, post_inline() must follow in the
  // same turn (it then fits).
  bool take_inline(ClientSession& c, std::uint32_t length) noexcept {
    if (length > shm::kInlineMaxBytes || c.is_shadow() || !c.cq.has_room(1 + shm::inline_slots(length))) return false;
    if (c.inline_credits == 0 && !refill_inline(c)) return false;
    --c.inline_credits;
    ++c.inline_posted;
    return true;
  }
  // Posts `entry` (kCqFlagInline set, offset and capacity 0) and the payload after it.
  void post_inline(ClientSession& c, const shm::CqEntry& entry, const std::byte* payload,
                   std::uint32_t length) noexcept {
    const bool posted = c.cq.try_push_record(entry, payload, length);
    if (FERRY_DEBUG_CHECKS && !posted) inline_lost(c);
    c.cq_dirty = c.cq_dirty || posted;
    bump(counters_.inline_deliveries);
  }
  // A client to detach at the end of this turn (a corrupt ring).
  void doom(ClientSession& c) noexcept {
    c.doomed = true;
    any_doomed_ = true;
  }
  bool any_doomed() const noexcept { return any_doomed_; }
  void doomed_reaped() noexcept { any_doomed_ = false; }
  // Drains overflow queues and rings the CQ doorbells of sleeping clients.
  void flush() noexcept;
  bool any_overflow() const noexcept;

 private:
  void released(std::uint32_t id) noexcept;  // a WR or access ended: a retired session may go now
  // take_inline's window ran out: the client's released count read again.
  bool refill_inline(ClientSession& c) noexcept;
  [[noreturn]] void inline_lost(ClientSession& c) noexcept;  // debug builds: a broken room check

  static bool in_use(const ClientSession& s) noexcept {
    return s.zc_inflight != 0 || s.remote_holds != 0 || s.shadow_refs != 0;
  }
  void destroy(std::unique_ptr<ClientSession> s) noexcept;  // a shadow tells its origin first

  Counters& counters_;
  std::unordered_map<std::uint32_t, std::unique_ptr<ClientSession>> clients_;
  std::vector<ClientSession*> order_;                    // polling order
  std::vector<std::unique_ptr<ClientSession>> retired_;  // detached, memory still reachable
  ZeroCopy zero_copy_;
  ShadowSink* shadow_sink_ = nullptr;
  bool any_doomed_ = false;
};

}  // namespace ferry::daemon
