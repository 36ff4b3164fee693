// Eager sends straight from a client's registered tx arena (rdma lanes):
// the WR's payload SGE names the client's memory by its segment MR, so the
// segment and MR must outlive the WR. Each such WR is signaled and tracked
// in a preallocated slot (client id + the op's own user_data); a client that
// detaches with some in flight stays retired until they complete. Every
// posted WR completes (success, error or flush on close), so retirement ends.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/engine.h"
#include "ferry_config.h"
#if FERRY_HAVE_RDMA
#include "transport/rdma/rdma_transport.h"
#endif

namespace ferry::daemon {

void Engine::setup_zero_copy() {
#if FERRY_HAVE_RDMA
  auto* r = dynamic_cast<transport::rdma::RdmaTransport*>(lanes_transport_.get());
  if (r == nullptr) return;
  rdma_pd_ = r->pd();
  // One slot per send WR the transport can hold at once.
  constexpr std::uint32_t kSlots = transport::rdma::kMaxConnections * transport::rdma::kSendQueueDepth;
  zc_slots_.assign(kSlots, ZcWr{});
  zc_free_.reserve(kSlots);
  for (std::uint32_t i = kSlots; i-- > 0;) zc_free_.push_back(i);
  retired_.reserve(64);
#endif
}

std::uint64_t Engine::zc_track(ClientSession& c, std::uint64_t user_data) noexcept {
  if (!c.mr.valid() || zc_free_.empty()) return 0;  // 0: post without the lkey (the transport copies)
  const std::uint32_t slot = zc_free_.back();
  zc_free_.pop_back();
  zc_slots_[slot] = ZcWr{c.id(), user_data};
  ++c.zc_inflight;
  return kZcTag | slot;
}

std::uint64_t Engine::zc_done(std::uint64_t user_data) noexcept {
  const auto slot = static_cast<std::uint32_t>(user_data & 0xFFFF'FFFFu);
  if (slot >= zc_slots_.size()) return 0;
  const ZcWr w = zc_slots_[slot];
  zc_slots_[slot] = ZcWr{};
  zc_free_.push_back(slot);
  auto it = std::find_if(retired_.begin(), retired_.end(), [&](const auto& s) { return s->id() == w.client; });
  if (it != retired_.end()) {
    if ((*it)->zc_inflight != 0 && --(*it)->zc_inflight == 0 && (*it)->remote_holds == 0) {
      spdlog::debug("client {}: last zero-copy WR done; segment released", w.client);
      retired_.erase(it);  // unmaps the segment, deregisters its MR
    }
  } else if (ClientSession* c = client(w.client)) {
    if (c->zc_inflight != 0) --c->zc_inflight;
  }
  return w.user_data;
}

void Engine::release_hold(std::uint32_t id) noexcept {
  if (ClientSession* c = client(id)) {
    if (c->remote_holds != 0) --c->remote_holds;
    return;
  }
  auto it = std::find_if(retired_.begin(), retired_.end(), [&](const auto& s) { return s->id() == id; });
  if (it == retired_.end()) return;
  if ((*it)->remote_holds != 0 && --(*it)->remote_holds == 0 && (*it)->zc_inflight == 0) {
    spdlog::debug("client {}: last remote access answered; segment released", id);
    retired_.erase(it);
  }
}

void Engine::retire(std::unique_ptr<ClientSession> s) {
  spdlog::debug("client {}: {} zero-copy WRs in flight, {} remote accesses pending; segment kept until they end",
                s->id(), s->zc_inflight, s->remote_holds);
  retired_.push_back(std::move(s));
}

}  // namespace ferry::daemon
