#include "daemon/session/sessions.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "ferry_config.h"

namespace ferry::daemon {

Sessions::Sessions(Counters& counters, std::size_t max_clients) : counters_(counters) {
  clients_.reserve(max_clients * 2);
  order_.reserve(max_clients);
  retired_.reserve(64);
}

Sessions::~Sessions() = default;

ClientSession* Sessions::find(std::uint32_t id) noexcept {
  auto it = clients_.find(id);
  return it == clients_.end() ? nullptr : it->second.get();
}

void Sessions::add(std::unique_ptr<ClientSession> s) {
  order_.push_back(s.get());
  const std::uint32_t id = s->id();
  clients_.emplace(id, std::move(s));
}

void Sessions::add_shadow(std::unique_ptr<ClientSession> s) {
  const std::uint32_t id = s->id();
  clients_.emplace(id, std::move(s));
}

void Sessions::remove(std::uint32_t id) {
  auto node = clients_.extract(id);
  if (node.empty()) return;
  if (auto it = std::find(order_.begin(), order_.end(), node.mapped().get()); it != order_.end()) order_.erase(it);
  ClientSession& s = *node.mapped();
  if (!in_use(s)) {
    destroy(std::move(node.mapped()));  // unmapped (and deregistered) here
    return;
  }
  spdlog::debug(
      "client {}: {} zero-copy WRs in flight, {} remote accesses pending, {} engines' shadows; segment kept until "
      "they end",
      id, s.zc_inflight, s.remote_holds, s.shadow_refs);
  retired_.push_back(std::move(node.mapped()));
}

void Sessions::destroy(std::unique_ptr<ClientSession> s) noexcept {
  if (s->is_shadow() && shadow_sink_ != nullptr) shadow_sink_->shadow_freed(*s);
}

void Sessions::post_done(std::uint32_t client, const shm::CqEntry& entry) noexcept {
  ClientSession* c = find(client);
  if (c == nullptr || c->is_shadow()) return;
  if (c->outstanding != 0) --c->outstanding;
  bump(counters_.ops_completed);
  post(*c, entry);
}

void Sessions::shadow_freed(std::uint32_t client) noexcept {
  if (ClientSession* c = find(client)) {
    if (c->shadow_refs != 0) --c->shadow_refs;
    return;
  }
  auto it = std::find_if(retired_.begin(), retired_.end(), [&](const auto& s) { return s->id() == client; });
  if (it != retired_.end() && (*it)->shadow_refs != 0 && --(*it)->shadow_refs == 0) released(client);
}

std::uint64_t Sessions::track_wr(ClientSession& c, std::uint64_t inner_tag) noexcept {
  const std::uint64_t tag = zero_copy_.track(c.id(), inner_tag);
  if (tag != 0) ++c.zc_inflight;
  return tag;
}

std::uint64_t Sessions::wr_done(std::uint64_t tag) noexcept {
  const ZeroCopy::Done d = zero_copy_.done(tag);
  if (d.inner_tag == 0) return 0;
  if (ClientSession* c = find(d.client)) {
    if (c->zc_inflight != 0) --c->zc_inflight;
    return d.inner_tag;
  }
  auto it = std::find_if(retired_.begin(), retired_.end(), [&](const auto& s) { return s->id() == d.client; });
  if (it != retired_.end() && (*it)->zc_inflight != 0 && --(*it)->zc_inflight == 0) released(d.client);
  return d.inner_tag;
}

void Sessions::release_hold(std::uint32_t id) noexcept {
  if (ClientSession* c = find(id)) {
    if (c->remote_holds != 0) --c->remote_holds;
    return;
  }
  auto it = std::find_if(retired_.begin(), retired_.end(), [&](const auto& s) { return s->id() == id; });
  if (it != retired_.end() && (*it)->remote_holds != 0 && --(*it)->remote_holds == 0) released(id);
}

void Sessions::released(std::uint32_t id) noexcept {
  auto it = std::find_if(retired_.begin(), retired_.end(), [&](const auto& s) { return s->id() == id; });
  if (it == retired_.end() || in_use(**it)) return;
  spdlog::debug("client {}: the last WR or peer access naming its memory ended; segment released", id);
  std::unique_ptr<ClientSession> gone = std::move(*it);
  retired_.erase(it);
  destroy(std::move(gone));  // unmaps the segment, deregisters its MR
}

void Sessions::post(ClientSession& c, const shm::CqEntry& entry) noexcept {
  if (c.is_shadow()) {
    if (shadow_sink_ != nullptr) shadow_sink_->shadow_done(c, entry);
    return;
  }
  if (c.overflow.empty() && c.cq.try_push(entry)) {
    c.cq_dirty = true;
    return;
  }
  if constexpr (FERRY_DEBUG_CHECKS) {
    // Bounded by construction: owed OpDones <= CQ capacity (dispatch.cpp),
    // and deliveries are only posted when the CQ has room.
    if (c.overflow.size() > std::size_t{c.cq.capacity()} + kSqBatch) {
      spdlog::critical("client {}: overflow queue exceeds its bound", c.id());
      std::abort();
    }
  }
  c.overflow.push_back(entry);
  bump(counters_.cq_overflows);
}

bool Sessions::refill_inline(ClientSession& c) noexcept {
  // The client's count is untrusted: one that claims more than was ever
  // posted makes the window look full, which only costs it the inlining.
  const std::uint32_t window = shm::inline_window(c.cq.capacity());
  const std::uint32_t unreleased = c.inline_posted - c.cq.consumer_released();
  if (unreleased >= window) return false;
  c.inline_credits = window - unreleased;
  return true;
}

void Sessions::inline_lost(ClientSession& c) noexcept {
  spdlog::critical("client {}: an inline delivery did not fit the room take_inline saw", c.id());
  std::abort();
}

void Sessions::complete(ClientSession& c, shm::Op op, std::uint64_t user_data, Status status, std::uint32_t handle,
                        std::uint32_t length) noexcept {
  // Every field written (no memset call): the reserved ones are 0.
  shm::CqEntry e;
  e.kind = static_cast<std::uint8_t>(shm::CqKind::OpDone);
  e.status = static_cast<std::uint8_t>(status);
  e.op = static_cast<std::uint8_t>(op);
  e.flags = 0;
  e.handle = handle;
  e.user_data = user_data;
  e.offset = 0;
  e.length = length;
  e.capacity = 0;
  e.token = 0;
  e.source = 0;
  e.caller_uid = 0;
  e.caller_flags = 0;
  e.reserved1 = 0;
  if (c.outstanding != 0) --c.outstanding;
  if (!c.is_shadow()) bump(counters_.ops_completed);  // counted where the client's own engine posts it
  post(c, e);
}

void Sessions::complete(std::uint32_t client, shm::Op op, std::uint64_t user_data, Status status,
                        std::uint32_t length) noexcept {
  if (ClientSession* c = find(client)) complete(*c, op, user_data, status, 0, length);
}

void Sessions::flush() noexcept {
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

bool Sessions::any_overflow() const noexcept {
  return std::any_of(order_.begin(), order_.end(), [](const ClientSession* c) { return !c->overflow.empty(); });
}

}  // namespace ferry::daemon
