// Client::Impl: everything one attached client holds. Private to libferry;
// the public API in ferry/client.h forwards to it. Three files, one side of
// the client each: attach.cpp (handshake, mapping, lifetime), submit.cpp
// (tx arena, SQ, the blocking serve/open/... control ops), completion.cpp
// (CQ, validation, daemon-gone sweep, the sleep protocol, hang-up).
//
// Not thread safe by design: one owner thread, no locks on the datapath.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "client/src/fixed_queue.h"
#include "client/src/fork_guard.h"
#include "client/src/inflight.h"
#include "client/src/inline_store.h"
#include "client/src/log.h"
#include "ferry/client.h"
#include "shm/doorbell.h"
#include "shm/ring.h"
#include "shm/ring_entries.h"
#include "shm/segment.h"
#include "shm/slab_allocator.h"

namespace ferry {

namespace client_detail {
// The public OpKind and the wire Op share their numbering (checked in completion.cpp).
constexpr shm::Op wire_op(OpKind k) noexcept { return static_cast<shm::Op>(static_cast<std::uint8_t>(k)); }
}  // namespace client_detail

// Hidden: libferry exports Client, not its insides (ferry/visibility.h).
class FERRY_LOCAL Client::Impl {
 public:
  // user_data of quiet ReleaseRx entries; only a failure comes back with it.
  static constexpr std::uint64_t kReleaseUserData = UINT64_MAX;
  static constexpr std::uint32_t kCqBatch = 64;

  Impl(int socket_fd, shm::MappedSegment segment, shm::Doorbell sq_bell, shm::Doorbell cq_bell,
       std::uint32_t inflight_slots, std::uint32_t release_slots, std::uint32_t stash_slots);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Creates the epoll fd (CQ doorbell + socket). false on failure.
  bool init_events() noexcept;
  void set_busy_poll(bool on) noexcept { busy_poll_ = on; }

  // submit.cpp: the submission side
  Buffer alloc(std::size_t bytes) noexcept;
  Buffer alloc_span(std::size_t bytes) noexcept;
  Status free(Buffer buffer) noexcept;
  Status send(EndpointId ep, const Buffer& msg, std::uint32_t length, std::uint64_t user_data) noexcept;
  Status call(EndpointId ep, const Buffer& req, std::uint32_t length, const Buffer& resp, std::uint64_t user_data,
              std::chrono::milliseconds timeout) noexcept;
  Status reply(std::uint64_t token, const Buffer& resp, std::uint32_t length, std::uint64_t user_data) noexcept;
  void release(const Completion& delivery) noexcept;
  // Pushes one entry and rings the SQ doorbell if the daemon sleeps. false: SQ full.
  bool push(const shm::SqEntry& e) noexcept;
  void flush_releases() noexcept;
  bool tx_range_ok(const Buffer& b, std::uint32_t length) const noexcept;

  // completion.cpp: the completion side, and waiting for it
  std::size_t poll(std::span<Completion> out) noexcept;
  // Translates one CQ entry; false when it is dropped (invalid or internal).
  bool translate(const shm::CqEntry& e, Completion& out) noexcept;
  // An inline delivery `e`: its payload fills the next ring slots, the
  // first `popped` of them already copied out to `more`, the rest still
  // in the ring. Copies it into inline_ and fills `out` (`translated`
  // says whether); returns how many of `more` it used.
  std::uint32_t take_inline(const shm::CqEntry& e, const shm::CqEntry* more, std::uint32_t popped, Completion& out,
                            bool& translated) noexcept;
  // The fields a Message/Request delivery has whether inline or in a block.
  static void fill_delivery(const shm::CqEntry& e, Completion& out) noexcept;
  // Completes every live op with state_ (DaemonGone, or Cancelled after detach()).
  std::size_t sweep_gone(std::span<Completion> out) noexcept;

  std::size_t wait(std::span<Completion> out, std::chrono::milliseconds timeout) noexcept;
  // Closes the attach socket (the daemon frees our resources); keeps the mapping.
  void detach() noexcept;
  // Non-blocking look at the socket; turns state_ DaemonGone on hang-up.
  void check_hangup() noexcept;
  // state(): state_, after a look at the socket when the last look is over
  // kHangupLookEvery old, so a client that never polls still learns within
  // that of its daemon's death (completion.cpp).
  Status current_state() noexcept;
  // Inherited by a child of fork(): every call refuses with Forked (fork_guard.h).
  bool forked() const noexcept { return fork_generation_ != client_detail::fork_generation(); }
  // Blocks on the epoll fd up to timeout_ms using the CQ sleep protocol.
  void sleep_for_cq(int timeout_ms) noexcept;

  // submit.cpp: blocking control ops (submit, then wait for their own OpDone)
  Result<std::uint32_t> control(OpKind op, std::uint32_t handle, std::string_view payload,
                                std::chrono::milliseconds timeout) noexcept;

  int socket_fd_ = -1;
  int epoll_fd_ = -1;
  shm::MappedSegment seg_;
  shm::Doorbell sq_bell_;
  shm::Doorbell cq_bell_;
  shm::RingProducer<shm::SqEntry> sq_;
  shm::RingConsumer<shm::CqEntry> cq_;
  shm::SlabAllocator tx_;
  std::uint64_t tx_offset_ = 0, tx_bytes_ = 0, rx_offset_ = 0, rx_bytes_ = 0;
  std::uint64_t max_message_ = 0;
  std::uint32_t client_id_ = 0;
  std::uint32_t engine_ = 0;  // the daemon engine it runs on
  std::uint64_t epoch_ = 0;
  Status state_ = Status::Ok;
  bool busy_poll_ = false;                                    // AttachOptions::busy_poll: poll() never arms
  bool cq_broken_ = false;                                    // a malformed inline delivery: the CQ is not read again
  std::uint32_t empty_polls_ = 0;                             // consecutive; paces the hang-up check
  std::chrono::steady_clock::time_point last_hangup_look_{};  // current_state()'s pace
  std::uint32_t fork_generation_ = client_detail::fork_generation();
  client_detail::InflightTable inflight_;
  client_detail::FixedQueue<std::uint64_t> releases_;  // ReleaseRx offsets waiting for SQ room
  client_detail::FixedQueue<Completion> stash_;        // completions seen while a control op waited
  client_detail::InlineStore inline_;                  // inline deliveries' payloads until released
  ClientStats counters_;
  client_detail::Log log_;  // AttachOptions::log and log_level
};

}  // namespace ferry
