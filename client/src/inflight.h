// The in-flight operation table. Every submitted op that expects an OpDone
// owns one preallocated slot; the SQ entry carries the slot's index and
// generation as user_data, so a completion the daemon writes can be matched
// (and a stale or forged one recognised) in O(1), and so that when the daemon
// goes away every live slot can be completed with DaemonGone exactly once.
// The user's own user_data stays here, never in shared memory.
#pragma once

#include <cstdint>
#include <vector>

#include "ferry/client.h"

namespace ferry::client_detail {

struct InflightSlot {
  std::uint64_t user_data = 0;
  std::uint64_t internal_buffer = 0;    // tx block a control op owns (freed on completion), 0: none
  const std::byte* response = nullptr;  // Call: caller's response buffer
  std::uint32_t response_capacity = 0;
  std::uint32_t generation = 1;
  OpKind op = OpKind::Nop;
  bool live = false;
  bool internal = false;   // a blocking control op waits for it; never surfaced by poll()
  bool abandoned = false;  // its waiter timed out: drop the completion when it comes
  bool done = false;       // internal op: its OpDone arrived (result, result_handle)
  Status result = Status::Ok;
  std::uint32_t result_handle = 0;
  std::uint32_t next_free = 0;
};

class InflightTable {
 public:
  static constexpr std::uint32_t kNone = UINT32_MAX;

  explicit InflightTable(std::uint32_t slots) : slots_(slots) {
    for (std::uint32_t i = 0; i < slots; ++i) slots_[i].next_free = i + 1 < slots ? i + 1 : kNone;
    free_head_ = slots ? 0 : kNone;
  }

  // kNone when every slot is busy (the caller reports Busy).
  std::uint32_t acquire(OpKind op, std::uint64_t user_data) noexcept {
    std::uint32_t i = free_head_;
    if (i == kNone) return kNone;
    InflightSlot& s = slots_[i];
    free_head_ = s.next_free;
    s.user_data = user_data;
    s.internal_buffer = 0;
    s.response = nullptr;
    s.response_capacity = 0;
    s.op = op;
    s.live = true;
    s.internal = false;
    s.abandoned = false;
    s.done = false;
    s.result = Status::Ok;
    s.result_handle = 0;
    ++live_;
    return i;
  }

  void release(std::uint32_t i) noexcept {
    InflightSlot& s = slots_[i];
    s.live = false;
    ++s.generation;  // a late or replayed completion for the old op no longer matches
    s.next_free = free_head_;
    free_head_ = i;
    --live_;
  }

  // The wire token for slot i: index in the low half, generation in the high half.
  std::uint64_t token(std::uint32_t i) const noexcept { return (std::uint64_t{slots_[i].generation} << 32) | i; }

  // Slot index for a token the daemon echoed, or kNone when it names no live op.
  std::uint32_t lookup(std::uint64_t token) const noexcept {
    const auto i = static_cast<std::uint32_t>(token);
    if (i >= slots_.size()) return kNone;
    const InflightSlot& s = slots_[i];
    if (!s.live || s.generation != static_cast<std::uint32_t>(token >> 32)) return kNone;
    return i;
  }

  InflightSlot& operator[](std::uint32_t i) noexcept { return slots_[i]; }
  std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(slots_.size()); }
  std::uint32_t live() const noexcept { return live_; }

 private:
  std::vector<InflightSlot> slots_;
  std::uint32_t free_head_ = kNone;
  std::uint32_t live_ = 0;
};

}  // namespace ferry::client_detail
