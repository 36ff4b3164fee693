#include "daemon/loop/peer_snapshot.h"

namespace ferry::daemon {

void PeerSnapshot::publish(std::vector<peer::PeerInfo>&& fresh, std::uint64_t now_ns) {
  next_ns_ = now_ns + kPublishNs;
  const std::uint64_t asked = asked_.load(std::memory_order_acquire);
  {
    std::lock_guard lock(mu_);
    copy_.swap(fresh);
    done_ = asked;
  }
  cv_.notify_all();
}

}  // namespace ferry::daemon
