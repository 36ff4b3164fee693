// Posting completions. Never dropped: what does not fit a client's CQ goes
// to its private overflow queue (in order), drained before anything newer.
#include <spdlog/spdlog.h>

#include "daemon/engine.h"

namespace ferry::daemon {

void Engine::post(ClientSession& c, const shm::CqEntry& entry) noexcept {
  if (c.overflow.empty() && c.cq.try_push(entry)) {
    c.cq_dirty = true;
    return;
  }
  if constexpr (FERRY_DEBUG_CHECKS) {
    // Bounded by construction (engine.h): owed OpDones <= CQ capacity, and
    // deliveries are only posted when the CQ has room.
    if (c.overflow.size() > std::size_t{c.cq.capacity()} + kSqBatch) {
      spdlog::critical("client {}: overflow queue exceeds its bound", c.id());
      std::abort();
    }
  }
  c.overflow.push_back(entry);
  bump(counters_.cq_overflows);
}

void Engine::complete(ClientSession& c, shm::Op op, std::uint64_t user_data, Status status, std::uint32_t handle,
                      std::uint32_t length) noexcept {
  shm::CqEntry e{};
  e.kind = static_cast<std::uint8_t>(shm::CqKind::OpDone);
  e.status = static_cast<std::uint8_t>(status);
  e.op = static_cast<std::uint8_t>(op);
  e.handle = handle;
  e.user_data = user_data;
  e.length = length;
  if (c.outstanding != 0) --c.outstanding;
  bump(counters_.ops_completed);
  post(c, e);
}

bool Engine::can_deliver(ClientSession& c) noexcept { return c.overflow.empty() && c.cq.free_slots() != 0; }

void Engine::flush_completions() noexcept {
  for (ClientSession* c : order_) {
    while (!c->overflow.empty()) {
      if (!c->cq.try_push(c->overflow.front())) break;
      c->overflow.pop_front();
      c->cq_dirty = true;
    }
    if (c->cq_dirty) {
      c->cq_dirty = false;
      if (c->cq.claim_doorbell()) c->cq_bell.ring();
    }
  }
}

}  // namespace ferry::daemon
