// Calls delivered to a server and not yet replied to, keyed by the request
// token the server must echo. The table is a slot pool (no allocation per
// call once warmed up); a token packs the slot and that slot's generation,
// masked with a per-daemon key, so a used or forged token never matches a
// live call. Engine thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/wire/remote_buffer.h"

namespace ferry::daemon {

struct PendingCall {
  std::uint32_t caller = 0;    // client id
  std::uint32_t endpoint = 0;  // caller's endpoint id
  std::uint32_t server = 0;    // client id the Request was delivered to
  std::uint32_t service = 0;
  std::uint64_t user_data = 0;
  std::uint64_t resp_offset = 0;
  std::uint32_t resp_length = 0;
  bool caller_gone = false;       // caller closed the endpoint or died, or timed out: reply gets CallerGone
  std::uint64_t deadline_ns = 0;  // its timeout passes then (0: none; serve/calls.h)
  // A call from a peer daemon (remote_channel != 0): the reply goes back as a
  // wire Response with remote_token to remote_ep; `endpoint` is the proxy id.
  std::uint32_t remote_channel = 0;
  std::uint32_t remote_ep = 0;
  std::uint32_t lane = 0;
  std::uint64_t remote_token = 0;
  // rdma: the caller's response buffer; the reply is RDMA-WRITTEN into it
  // (with immediate) instead of sent as a Response. rkey 0: none.
  wire::RemoteBuffer resp_remote{};
};

class CallTable {
 public:
  CallTable(std::uint64_t key, std::size_t reserve);

  // Stores the call; returns its token (never 0).
  [[nodiscard]] std::uint64_t insert(const PendingCall& call);
  // The live call for this token, or nullptr (unknown, used, or forged).
  [[nodiscard]] PendingCall* find(std::uint64_t token) noexcept;
  void erase(std::uint64_t token) noexcept;
  std::size_t size() const noexcept { return live_; }

  // f(PendingCall&) -> true to erase the call. Control-rate operations only
  // (Close, detach): it walks every slot.
  template <typename F>
  void sweep(F&& f) {
    for (std::uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].live && f(slots_[i].call)) release(i);
    }
  }

 private:
  struct Slot {
    PendingCall call;
    std::uint32_t generation = 0;
    bool live = false;
  };
  bool decode(std::uint64_t token, std::uint32_t* index) const noexcept;
  void release(std::uint32_t index) noexcept;

  std::uint64_t key_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  std::size_t live_ = 0;
};

}  // namespace ferry::daemon
