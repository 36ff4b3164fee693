// Staging: peers' deliveries whose receiver is full wait here, in order per
// proxy, within a share of staging-bytes each (proxy_server.h).
#include <algorithm>

#include "daemon/peer/channel_manager.h"
#include "daemon/serve/proxy_server.h"

namespace ferry::daemon {

namespace {

// A proxy may fill at most 1/kStagingShares of staging-bytes (at least one message).
constexpr std::uint64_t kStagingShares = 8;

}  // namespace

void ProxyServer::stage(std::uint32_t channel, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
                        std::uint64_t call_deadline_ns) {
  // Each proxy (one remote endpoint) gets at most a share of the staging
  // area, so one stalled service fills only its share and every other
  // endpoint sharing the channel keeps the rest (its senders get Busy; with
  // the endpoint window they wait at their own daemon first).
  Proxy* p = proxy_of(channel, h.dst_ep);
  const std::uint64_t share = std::max<std::uint64_t>(staging_limit_ / kStagingShares, h.payload_len);
  if (staged_bytes_ + h.payload_len > staging_limit_ || (p != nullptr && p->staged_bytes + h.payload_len > share)) {
    bump(counters_.busy_rejects);
    if (p != nullptr && h.seq != 0) p->refused_from = h.seq;
    answer(channel, lane, h, Status::Busy);
    return;
  }
  Staged sd;
  sd.channel = channel;
  sd.lane = lane;
  sd.header = h;
  sd.payload.assign(payload, payload + h.payload_len);
  sd.deadline_ns = deadlines_.waiting(call_deadline_ns);
  sd.call_deadline_ns = call_deadline_ns;
  staged_bytes_ += h.payload_len;
  staged_.push_back(std::move(sd));
  if (p != nullptr) {
    ++p->staged;
    p->staged_bytes += h.payload_len;
  }
  bump(counters_.staged);
}

void ProxyServer::unstage(const Staged& sd) noexcept {
  if (Proxy* p = proxy_of(sd.channel, sd.header.dst_ep); p != nullptr && p->staged != 0) {
    --p->staged;
    p->staged_bytes -= std::min<std::uint64_t>(p->staged_bytes, sd.header.payload_len);
  }
  staged_bytes_ -= sd.header.payload_len;
}

std::size_t ProxyServer::retry_staged() {
  if (staged_.empty()) return 0;
  std::size_t progress = 0;
  const std::uint64_t now = deadlines_.now();
  blocked_.clear();
  for (auto it = staged_.begin(); it != staged_.end();) {
    const Staged& sd = *it;
    const std::uint32_t proxy = sd.header.dst_ep;
    const Proxy* p = proxy_of(sd.channel, proxy);
    const bool behind_reads = p != nullptr && p->reading != 0 && sd.header.type != wire::MsgType::RendezvousReq;
    if (behind_reads || std::find(blocked_.begin(), blocked_.end(), proxy) != blocked_.end()) {
      if (behind_reads) blocked_.push_back(proxy);
      ++it;
      continue;
    }
    Outcome o = deliver(sd.channel, sd.lane, sd.header, sd.payload.data(), sd.call_deadline_ns);
    if (o.is_blocked() && now >= sd.deadline_ns) {
      bump(counters_.timeouts);
      o = Outcome::failed(Status::Timeout);
    }
    if (o.is_blocked()) {
      blocked_.push_back(proxy);
      ++it;
      continue;
    }
    if (o.is_done() && sd.header.type == wire::MsgType::Send) answer(sd.channel, sd.lane, sd.header, Status::Ok);
    if (o.is_failed()) answer(sd.channel, sd.lane, sd.header, o.status);
    unstage(sd);
    it = staged_.erase(it);
    ++progress;
  }
  return progress;
}

}  // namespace ferry::daemon
