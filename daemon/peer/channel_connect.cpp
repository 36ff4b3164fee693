// ChannelManager: connecting. Every connect goes through the transport's
// connect_async (tcp: the socket connects in the background; rdma: rdma_cm
// steps driven by its events), so the engine thread never waits for a
// peer's answer: a connection is ours once the transport reports it
// Connected, and a refused or timed-out one comes back Closed
// (PeerUnreachable). A transport without connect_async connects within its
// own bounded timeout instead. Also here: dialling a channel's lanes, and
// the channel going Up once they joined.
#include <arpa/inet.h>
#include <spdlog/spdlog.h>

#include "daemon/peer/channel_manager.h"
#include "daemon/rails/rail_config.h"
#include "daemon/rails/rail_set.h"
#include "ferry_config.h"

namespace ferry::daemon::peer {

void ChannelManager::open_lanes(Channel& ch, std::uint64_t now_ns) {
  for (std::uint32_t i = 0; i < ch.lane_count; ++i) {
    if (start_connect(ch, static_cast<std::int32_t>(i), now_ns) != Status::Ok) return;
  }
}

void ChannelManager::become_up(Channel& ch, std::uint64_t now_ns) {
  for (std::uint32_t i = 0; i < ch.lane_count; ++i) ch.lanes[i].open();
  set_state(ch, ChannelState::Up, now_ns);
  ch.was_up = true;
  if (!ch.address.empty()) table_.addresses().forget_redial(ch.address);
  bump(counters_.peer_connects);
  bump(counters_.channels_opened);
  ch.last_active_ns = now_ns;
  ch.last_heard_ns = now_ns;
  ch.next_ping_ns = now_ns;  // first heartbeat right away gives an RTT early
  handshake_.resolve_duplicate(ch, now_ns);
  events_.on_channel_up(ch);
  // A losing duplicate nobody uses closes (its initiator decides).
  for (auto& [id, other] : table_) {
    if (other->peer_epoch == ch.peer_epoch) close_if_unused(*other, now_ns);
  }
}

Result<transport::ConnId> ChannelManager::dial_lane(Channel& ch, std::uint32_t lane) {
#if FERRY_HAVE_RDMA
  // Lane i leaves from the i-th rail that is up (after its failed dials,
  // the next ones; a channel of fewer lanes than rails counts from a rail
  // of its own) to the peer's rail of the same index (modulo its rails).
  const std::uint32_t slot = rails::lane_rail_slot(lane, ch.lane_count, ch.id, rails_->count());
  const std::uint32_t r = rails_->pick(slot, ch.rail_skip[lane]);
  if (r >= rails_->count()) return Result<transport::ConnId>::fail(Status::PeerUnreachable);  // no rail is up
  std::string host = ch.host;
  if (ch.peer_rail_count != 0) {
    char buf[INET_ADDRSTRLEN] = {};
    in_addr a{};
    a.s_addr = ch.peer_rails[r % ch.peer_rail_count];
    if (inet_ntop(AF_INET, &a, buf, sizeof buf) != nullptr) host = buf;
  }
  spdlog::info("channel {} ({}) lane {}: dialling {} from rail {} ({} {})", ch.id, ch.address, lane, host, r,
               rails_->info(r).name, rails_->info(r).address);
  return rails_->connect_on(r, host, ch.port);
#else
  (void)lane;
  return lanes_.connect_async(ch.host, ch.port);
#endif
}

void ChannelManager::log_dial_failed(const Channel& ch, bool on_lanes, Status why, std::uint64_t now_ns) {
  const char* what = on_lanes ? "lane" : "bootstrap";
  if (why != Status::Busy) {
    spdlog::warn("channel {} to {}: {} connect failed ({})", ch.id, ch.address, what, to_string(why));
    return;
  }
  std::uint64_t unlogged = 0;
  if (!no_slot_log_.allow(now_ns, unlogged)) return;
  spdlog::warn("channel {} to {}: {} connect failed (Busy): no free peer-max-connections slot here{}", ch.id,
               ch.address, what,
               unlogged == 0 ? std::string() : fmt::format(" ({} more such dials since the last line)", unlogged));
}

Status ChannelManager::start_connect(Channel& ch, std::int32_t lane, std::uint64_t now_ns) {
  const bool on_lanes = lane >= 0;
  transport::Transport& t = via(on_lanes);
  bool pending = true;
  auto conn = on_lanes && rails_ != nullptr ? dial_lane(ch, static_cast<std::uint32_t>(lane))
                                            : t.connect_async(ch.host, ch.port);
  if (conn.status == Status::NotSupported) {
    conn = t.connect(ch.host, ch.port);
    pending = false;
  }
  if (!conn) {
    log_dial_failed(ch, on_lanes, conn.status, now_ns);
    // Busy: every peer-max-connections slot is taken here; anything else: the peer is out of reach.
    const Status why = conn.status == Status::Busy ? Status::Busy : Status::PeerUnreachable;
    if (why == Status::Busy) {
      bump(counters_.peer_dials_refused);
      if (&t == &via(false)) {  // the bootstrap transport's slots: no new channel dials for a while
        no_slot_until_ns_ = now_ns + kNoSlotHoldNs;
        slot_wanted_ = true;
      }
    }
    if (on_lanes) {
      lane_connect_failed(ch, static_cast<std::uint32_t>(lane), why, now_ns);
      return why;
    }
    // Nothing was reported up to anyone yet: the caller gets the status.
    // (Busy is no peer's failure: peer_dials_refused counted it.)
    if (why != Status::Busy) bump(counters_.peer_failures);
    if (AddressBook::Entry* e = table_.addresses().find(ch.address); e != nullptr && e->channel == ch.id) {
      table_.addresses().route(ch.address, 0);
    }
    ch.state = ChannelState::Failed;
    changed_ = true;
    table_.retire(ch.id);
    return why;
  }
  table_.conns().set(conn.value, on_lanes, ConnTable::Ref{ch.id, lane});
  if (on_lanes) {
    ch.lanes[static_cast<std::uint32_t>(lane)].set_conn(conn.value);
    LaneAuth& la = ch.lane_auth[static_cast<std::uint32_t>(lane)];
    la.dialed = false;  // a new connection: its own Challenge and nonce
    la.challenged = false;
  } else {
    ch.bootstrap = conn.value;  // connecting: finish() abandons it with the channel
  }
  if (!pending) connected(ch, lane, conn.value, now_ns);
  return Status::Ok;
}

void ChannelManager::connected(Channel& ch, std::int32_t lane, transport::ConnId conn, std::uint64_t now_ns) {
  if (lane < 0) {
    ch.bootstrap = conn;
    set_state(ch, ChannelState::Handshaking, now_ns);
    handshake_.send_hello(ch, conn, 0, false, Status::Ok, false);
    return;
  }
  const auto i = static_cast<std::uint32_t>(lane);
  ch.lanes[i].set_conn(conn);
  ch.lane_auth[i].dialed = true;
  // With auth the Hello answers the acceptor's Challenge (on_challenge).
  if (handshake_.auth_on() && !ch.lane_auth[i].challenged) return;
  handshake_.send_hello(ch, conn, i + 1, false, Status::Ok, true);
}

void ChannelManager::lane_connect_failed(Channel& ch, std::uint32_t lane, Status why, std::uint64_t now_ns) {
  Lane& l = ch.lanes[lane];
  if (l.conn() != transport::kInvalidConn) table_.conns().erase(l.conn(), true);
  l.set_conn(transport::kInvalidConn);
  ++ch.rail_skip[lane];  // several rails: the next dial tries the next one
  if (ch.usable() && l.broken()) {
    spdlog::info("channel {} ({}) lane {}: connect for the rebuild failed; dialling again in {} ms", ch.id, ch.address,
                 lane, kLaneRedialNs / 1'000'000);
    // Rebuilding: dial again shortly, within the rebuild budget (channel_tick).
    l.set_redial_ns(now_ns + kLaneRedialNs);
    return;
  }
  fail(ch, why, now_ns);
}

void ChannelManager::on_connected(const transport::Completion& c, bool on_lanes, std::uint64_t now_ns) {
  const ConnTable::Ref* ref = table_.conns().find(c.conn, on_lanes);
  Channel* ch = ref == nullptr ? nullptr : find(ref->channel);
  if (ch == nullptr || ch->finished()) {
    if (ref != nullptr) table_.conns().erase(c.conn, on_lanes);
    (void)via(on_lanes).close(c.conn);  // nobody waits for it any more; EndpointClosed: gone already
    return;
  }
  const std::int32_t lane = ref->lane;
  connected(*ch, lane, c.conn, now_ns);
}

}  // namespace ferry::daemon::peer
