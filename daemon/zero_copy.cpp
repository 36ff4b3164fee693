// WRs whose payload is a client's memory: eager sends straight from its
// registered tx arena (rdma: the payload SGE names the segment's MR), tcp
// writes straight from it (the transport holds the pointer until written),
// credit-backlogged WRs of either. The segment (and MR) must outlive the WR. Each such WR is signaled and tracked
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
  if (auto* r = dynamic_cast<transport::rdma::RdmaTransport*>(lanes_transport_.get())) {
    rdma_pd_ = r->pd();
    keys_.enable(rdma_pd_, r->gid().index, config_.rdma_windows);
  }
#endif
  // One slot per WR that may name client memory at once: the transport's
  // send queues plus the lanes' credit backlogs (rdma), or tcp's write
  // queues. With none free an op waits (parked) rather than go untracked.
  constexpr std::uint32_t kSlots = 65536;
  zc_slots_.assign(kSlots, ZcWr{});
  zc_free_.reserve(kSlots);
  for (std::uint32_t i = kSlots; i-- > 0;) zc_free_.push_back(i);
  retired_.reserve(64);
}

std::uint64_t Engine::zc_track(ClientSession& c, std::uint64_t user_data) noexcept {
  if (zc_free_.empty()) return 0;  // 0: every slot busy; the caller must not post
  const std::uint32_t slot = zc_free_.back();
  zc_free_.pop_back();
  zc_slots_[slot] = ZcWr{c.id(), user_data};
  ++c.zc_inflight;
  return WrTag::zero_copy(slot);
}

std::uint64_t Engine::zc_done(std::uint64_t user_data) noexcept {
  const std::uint32_t slot = WrTag::decode(user_data).slot;
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
