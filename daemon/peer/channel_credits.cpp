#include "daemon/peer/channel_credits.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ferry::daemon::peer {

ChannelCredits::ChannelCredits(const transport::TransportCaps& caps, const CreditConfig& cfg) {
  // Our initial grant per lane is the pool's floor (offer); at least 2, so
  // one data message fits beside the reserved credit.
  ReceivePoolConfig pc;
  pc.connections = std::max<std::uint32_t>(1, caps.max_connections);
  if (cfg.floor == 0) {
    // One for one: every connection's recv_depth, as with per-QP queues.
    pc.floor = pc.share = std::clamp<std::uint32_t>(caps.recv_depth, ReceivePool::kMinFloor, wire::kMaxInitialCredits);
    pc.receives = caps.recv_pool != 0 ? caps.recv_pool : pc.connections * pc.floor;
  } else {
    pc.floor = cfg.floor;
    pc.share = cfg.share;
    pc.receives = caps.recv_pool != 0 ? caps.recv_pool : cfg.receives;
  }
  if (const Error bad = ReceivePool::check(pc); bad.failed())
    throw std::invalid_argument("receive credits: " + bad.message());  // start-up only
  pool_ = ReceivePool(pc);
  initial_grant_ = pc.floor;
  grant_threshold_ = std::max<std::uint32_t>(1, pc.share / 4);
  spdlog::info(
      "receive credits: pool of {} receives ({}), floor {} reserved for each of {} connections, share {} per lane",
      pc.receives, caps.recv_pool != 0 ? "the lane transport's shared receive queue" : "a budget", pc.floor,
      pc.connections, pc.share);
  if (pool_.shared() < pc.share && pc.share > pc.floor) {
    spdlog::warn(
        "receive credits: only {} of the pool are left to share beyond the floors, less than one lane's share "
        "({}): busy lanes stay near their floor of {}; raise receive-pool (or lower peer-max-connections / "
        "rdma-max-connections)",
        pool_.shared(), pc.share, pc.floor);
  }
}

void ChannelCredits::offer(wire::Handshake& hs) const noexcept {
  hs.initial_credits = initial_grant_;
  if (pool_.share() > pool_.floor()) hs.capabilities |= wire::kCapCreditPool;
}

void ChannelCredits::reposted(ChannelTable& channels, std::uint64_t now_ns) noexcept {
  if (!reposts_due_) return;
  reposts_due_ = false;
  for (auto& [id, ch] : channels) {
    if (ch->finished()) continue;
    for (std::uint32_t i = 0; i < ch->lane_count; ++i) {
      Lane& l = ch->lanes[i];
      if (l.reposted(now_ns) && grant_due(l) && ch->usable()) (void)l.post_credit();
    }
  }
}

}  // namespace ferry::daemon::peer
