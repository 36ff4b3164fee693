// Connecting a channel's connections: the bootstrap one and each data lane.
// Every connect goes through the transport's connect_async (tcp: the socket
// connects in the background; rdma: rdma_cm steps driven by its events), so
// the engine thread never waits for a peer's answer: a connection is ours
// once the transport reports it Connected, and a refused or timed-out one
// comes back Closed (PeerUnreachable). A transport without connect_async
// connects within its own bounded timeout instead.
#include <spdlog/spdlog.h>

#include "daemon/peer/channel_manager.h"

namespace ferry::daemon::peer {

bool ChannelManager::start_connect(Channel& ch, std::int32_t lane, std::uint64_t now_ns) {
  const bool on_lanes = lane >= 0;
  transport::Transport& t = via(on_lanes);
  bool pending = true;
  auto conn = t.connect_async(ch.host, ch.port);
  if (conn.status == Status::NotSupported) {
    conn = t.connect(ch.host, ch.port);
    pending = false;
  }
  if (!conn) {
    spdlog::warn("channel {} to {}: {} connect failed ({})", ch.id, ch.address, on_lanes ? "lane" : "bootstrap",
                 to_string(conn.status));
    if (on_lanes) return lane_connect_failed(ch, static_cast<std::uint32_t>(lane), now_ns);
    // Nothing was reported up to anyone yet: the caller gets the status.
    bump(counters_.peer_failures);
    if (auto it = by_address_.find(ch.address); it != by_address_.end() && it->second == ch.id) by_address_.erase(it);
    ch.state = ChannelState::Failed;
    changed_ = true;
    finished_.push_back(ch.id);
    return false;
  }
  conns_[key(conn.value, on_lanes)] = ConnRef{ch.id, lane};
  if (on_lanes) {
    ch.lanes[static_cast<std::uint32_t>(lane)].conn = conn.value;
  } else {
    ch.bootstrap = conn.value;  // connecting: finish() abandons it with the channel
  }
  if (!pending) connected(ch, lane, conn.value, now_ns);
  return true;
}

void ChannelManager::connected(Channel& ch, std::int32_t lane, transport::ConnId conn, std::uint64_t now_ns) {
  if (lane < 0) {
    ch.bootstrap = conn;
    set_state(ch, ChannelState::Handshaking, now_ns);
    send_hello(ch, conn, 0, false, Status::Ok, false);
    return;
  }
  const auto i = static_cast<std::uint32_t>(lane);
  ch.lanes[i].conn = conn;
  send_hello(ch, conn, i + 1, false, Status::Ok, true);
}

bool ChannelManager::lane_connect_failed(Channel& ch, std::uint32_t lane, std::uint64_t now_ns) {
  Lane& l = ch.lanes[lane];
  if (l.conn != transport::kInvalidConn) conns_.erase(key(l.conn, true));
  l.conn = transport::kInvalidConn;
  if (ch.usable() && l.broken) {
    spdlog::info("channel {} ({}) lane {}: connect for the rebuild failed; dialling again in {} ms", ch.id, ch.address,
                 lane, kLaneRedialNs / 1'000'000);
    // Rebuilding: dial again shortly, within the rebuild budget (rebuild_tick).
    l.redial_ns = now_ns + kLaneRedialNs;
    return false;
  }
  fail(ch, Status::PeerUnreachable, now_ns);
  return false;
}

void ChannelManager::on_connected(const transport::Completion& c, bool on_lanes, std::uint64_t now_ns) {
  auto it = conns_.find(key(c.conn, on_lanes));
  Channel* ch = it == conns_.end() ? nullptr : find(it->second.channel);
  if (ch == nullptr || ch->finished()) {
    if (it != conns_.end()) conns_.erase(it);
    (void)via(on_lanes).close(c.conn);  // nobody waits for it any more; EndpointClosed: gone already
    return;
  }
  connected(*ch, it->second.lane, c.conn, now_ns);
}

}  // namespace ferry::daemon::peer
