// A channel's life once it is set up: heartbeats and deadlines (each tick),
// receive-credit grants, lane rebuilds, and failing or ending it.
//
// Liveness (heartbeat.h): after peer_timeout_ms of silence the channel fails
// with PeerReset; a handshake that has not finished by connect_timeout_ms
// fails with PeerUnreachable.
//
// Rebuilding a broken data lane (docs/reliability.md): a lane whose
// connection closed, failed a WR, missed a lane_seq or left a message
// unacknowledged for twice peer_timeout_ms is dropped with its ring kept;
// the initiator dials a new connection and sends a rejoin Hello (token
// lane+1, kFlagRetransmit, ack = the last lane_seq it got); the acceptor
// answers with its own ack; each side completes what the other confirmed
// and posts the rest again with the same numbers (Lane::replay). A lane not
// rebuilt within peer_timeout_ms, more than kMaxRebuilds rebuilds within
// kRebuildWindowNs, or an ack outside what we sent fails the channel.
//
// Channels on demand (max-channels; docs/operations.md). Past the cap,
// each tick asks the peer of the idlest channel with nothing in flight to
// close it: Goodbye(Ok, token kIdleClose) on the bootstrap connection. The
// peer agrees when nothing is in flight on its side either, by ending the
// channel the ordinary orderly way (its plain Goodbye, then close), or
// refuses with Goodbye(Busy, kIdleClose). While we ask, new Opens to that
// peer wait (route() skips the channel); when the peer agrees and an Open
// waits, a new channel is dialled at once and the Open moves to it
// (RemoteSender::channel_down takes the successor): its endpoint sees a
// short delay. A channel with an endpoint or proxy, a WR kept or queued on
// a lane, or a remote op of the engine's is never closed, on either side,
// so with every channel busy the cap is a target, not a limit. A daemon
// without this feature hears the ask as a Goodbye and ends the channel
// orderly: the same outcome.
#include <spdlog/spdlog.h>

#include "daemon/peer/channel_manager.h"
#include "daemon/peer/heartbeat.h"
#include "daemon/rails/rail_config.h"
#include "daemon/rails/rail_set.h"
#include "ferry_config.h"

namespace ferry::daemon::peer {

namespace {

constexpr std::uint32_t kMaxRebuilds = 8;
constexpr std::uint64_t kRebuildWindowNs = 10'000'000'000;

}  // namespace

void ChannelManager::set_state(Channel& ch, ChannelState to, std::uint64_t now_ns) {
  if (!can_transition(ch.state, to)) {
    spdlog::error("channel {}: illegal transition {} -> {} refused", ch.id, to_string(ch.state), to_string(to));
    return;
  }
  // A stranger's channel (any Hello makes one) logs its steps at debug: its
  // Hello line, rate-limited, is its record (on_hello).
  spdlog::log(ch.proven() || to == ChannelState::Up ? spdlog::level::info : spdlog::level::debug,
              "channel {} ({}{}): {} -> {}", ch.id, ch.address.empty() ? "accepted" : ch.address.c_str(),
              ch.peer_epoch == 0 ? "" : fmt::format(", epoch {:#018x}", ch.peer_epoch), to_string(ch.state),
              to_string(to));
  ch.state = to;
  ch.state_since_ns = now_ns;
  changed_ = true;
}

std::size_t ChannelManager::tick(std::uint64_t now_ns) {
  last_now_ns_ = now_ns;
  std::size_t work = 0;
  for (auto& [id, ch] : table_) {
    if (ch->finished()) continue;
    if (ch->state == ChannelState::Connecting || ch->state == ChannelState::Handshaking) {
      if (now_ns >= ch->deadline_ns) {
        spdlog::log(ch->proven() ? spdlog::level::warn : spdlog::level::debug,
                    "channel {} ({}): handshake did not finish within {} ms", ch->id, ch->address,
                    cfg_.connect_timeout_ms);
        fail(*ch, Status::PeerUnreachable, now_ns);
        ++work;
      }
      continue;
    }
    channel_tick(*ch, now_ns);
    if (ch->unused_since_ns != 0) close_if_unused(*ch, now_ns);
  }
  if (cfg_.max_channels != 0) evict_idle(now_ns);
  reap();
  return work;
}

void ChannelManager::channel_tick(Channel& ch, std::uint64_t now_ns) {
  const HeartbeatStep hb = heartbeat_step(ch, now_ns, cfg_.heartbeat_ms, cfg_.peer_timeout_ms);
  if (hb.dead) {
    spdlog::warn("channel {} ({}): peer silent for {} ms; declaring it dead", ch.id, ch.address,
                 (now_ns - ch.last_heard_ns) / 1'000'000);
    fail(ch, Status::PeerReset, now_ns);
    return;
  }
  if (hb.missed) bump(counters_.heartbeats_missed);
  if (hb.ping) (void)post_on_bootstrap(transport_, ch, ping_header(now_ns));  // a lost ping: the next one goes
  if (!ch.usable()) return;
  // Rebuild deadlines and the retransmission timeout (unacked too long).
  const std::uint64_t budget_ns = std::uint64_t{cfg_.peer_timeout_ms} * 1'000'000;
  const std::uint64_t rto_ns = 2 * budget_ns;
  for (std::uint32_t i = 0; i < ch.lane_count && ch.usable(); ++i) {
    Lane& l = ch.lanes[i];
    if (l.broken()) {
      if (now_ns - l.broken_ns() > budget_ns) {
        spdlog::warn("channel {} ({}) lane {}: not rebuilt within {} ms; failing the channel", ch.id, ch.address, i,
                     cfg_.peer_timeout_ms);
        fail(ch, Status::PeerReset, now_ns);
      } else if (ch.initiated && l.conn() == transport::kInvalidConn && now_ns >= l.redial_ns()) {
        start_connect(ch, static_cast<std::int32_t>(i), now_ns);  // the last dial failed: again
      }
      continue;
    }
    if (!l.joined()) continue;
    // The oldest message the peer has not acknowledged. Acks ride on every
    // message and on the Credit the peer sends each tick it owes one, so
    // this long means the message (or the way back) is gone.
    const std::optional<std::uint64_t> oldest = l.oldest_unacked_ns();
    if (oldest && now_ns - *oldest > rto_ns) {
      break_lane(ch, i,
                 fmt::format("lane_seq {} unacknowledged for {} ms", l.acked() + 1, (now_ns - *oldest) / 1'000'000),
                 now_ns);
      continue;
    }
    // Idle lane: grant what data used, and ack what has waited a tick (a
    // pooled grant may be nothing). Receives used by the peer's Credit
    // messages alone wait for a piggyback or the threshold, else two idle
    // daemons would trade one-credit Credit messages forever.
    const bool ack = l.ack_overdue();
    if (ack || l.owes_for_data()) (void)l.post_credit();  // not taken: the next tick tries again
    if (l.waiting()) flush(ch, i);                        // after a Busy send queue
  }
  if (rails_ != nullptr && ch.usable()) rails_back(ch, now_ns);
}

void ChannelManager::rails_back(Channel& ch, std::uint64_t now_ns) {
#if FERRY_HAVE_RDMA
  // A rail came back: the initiator moves each lane that left its own rail
  // back there (a deliberate rebuild: the ring replays what the peer has not
  // confirmed, so nothing is lost), one lane per tick so traffic never
  // stands still on every lane at once.
  const std::uint64_t returns = rails_->returns_total();
  if (ch.rail_returns_seen == returns) return;
  if (!ch.initiated) {
    ch.rail_returns_seen = returns;
    return;
  }
  for (std::uint32_t i = 0; i < ch.lane_count; ++i) {
    Lane& l = ch.lanes[i];
    if (l.broken() || !l.joined() || l.conn() == transport::kInvalidConn) return;  // settle first, next tick
  }
  ch.rail_skip = {};
  for (std::uint32_t i = 0; i < ch.lane_count; ++i) {
    const std::uint32_t want = rails_->pick(rails::lane_rail_slot(i, ch.lane_count, ch.id, rails_->count()), 0);
    const std::uint32_t now_on = rails::RailSet::rail_of(ch.lanes[i].conn());
    if (want >= rails_->count() || want == now_on) continue;
    bump(counters_.rail_moves);
    break_lane(ch, i, fmt::format("rail {} is back; moving the lane from rail {} to it", want, now_on), now_ns);
    return;  // the next one at a later tick
  }
  ch.rail_returns_seen = returns;
#else
  (void)ch;
  (void)now_ns;
#endif
}

void ChannelManager::fail(Channel& ch, Status why, std::uint64_t now_ns) {
  if (ch.finished()) return;
  // A channel someone opened to us that never got a lane joined (with a
  // secret: never proved it holds it) is a refused stranger, not a peer
  // that died: it has a counter of its own and leaves peer_failures alone.
  bump(ch.proven() ? counters_.peer_failures : counters_.peer_bootstrap_refusals);
  finish(ch, why, false, now_ns);
}

void ChannelManager::finish(Channel& ch, Status why, bool orderly, std::uint64_t now_ns) {
  if (ch.finished()) return;
  wire::Header bye;
  bye.type = wire::MsgType::Goodbye;
  bye.status = Status::Ok;
  // Best effort: the connection closes right after, which the peer sees as
  // the channel ending either way; only the reason in its log is lost.
  if (orderly && !post_on_bootstrap(transport_, ch, bye)) spdlog::debug("channel {}: Goodbye not sent", ch.id);
  // Forget the connections first: their Closed completions then find no
  // channel, and the channel is reported down exactly once, here.
  auto drop = [this](transport::ConnId c, bool on_lanes) {
    if (c == transport::kInvalidConn) return;
    table_.conns().erase(c, on_lanes);
    (void)via(on_lanes).close(c);  // the channel is down either way; EndpointClosed: gone already
  };
  drop(ch.bootstrap, false);  // a connect under way is abandoned
  for (std::uint32_t i = 0; i < kMaxLanes; ++i) drop(ch.lanes[i].conn(), true);
  if (AddressBook::Entry* e = ch.address.empty() ? nullptr : table_.addresses().find(ch.address);
      e && e->channel == ch.id) {
    // Later Opens to this address use the peer's other channel if it has one
    // (else they would dial a fresh duplicate).
    Channel* next = successor(ch);
    table_.addresses().route(ch.address, next != nullptr ? next->id : 0);
  }
  set_state(ch, orderly ? ChannelState::Down : ChannelState::Failed, now_ns);
  if (!orderly && ch.initiated && !ch.address.empty()) {  // we only redial what we dialled
    Redial& r = table_.addresses().at(ch.address).redial;
    r.defer(ch.was_up, now_ns);
    spdlog::info("channel {} to {}: next dial not before {} ms from now", ch.id, ch.address, r.delay_ns / 1'000'000);
  }
  // WRs waiting for credits fail before the channel is reported down, so
  // the engine settles them (zero-copy holds) while the ops still exist.
  for (std::uint32_t i = 0; i < ch.lane_count; ++i) ch.lanes[i].close();
  events_.on_channel_down(ch, why);
  table_.retire(ch.id);
}

void ChannelManager::unbind_endpoint(Channel& ch) {
  if (ch.endpoints != 0) --ch.endpoints;
  close_if_unused(ch, last_now_ns_);
}

void ChannelManager::close_if_unused(Channel& ch, std::uint64_t now_ns) {
  if (ch.state != ChannelState::Draining || !ch.initiated || ch.endpoints != 0 || ch.finished()) return;
  if (ch.unused_since_ns == 0) ch.unused_since_ns = now_ns;
  // Not while a lane still holds a WR the peer has not confirmed: a Reply
  // it has received would otherwise complete PeerReset here. The last
  // endpoint's Close carries our ack of the peer's last messages, and the
  // peer's ack of the Close (its next message or Credit, within a tick)
  // settles ours.
  bool settled = true;
  for (std::uint32_t i = 0; i < ch.lane_count; ++i) settled = settled && ch.lanes[i].settled();
  if (settled || now_ns - ch.unused_since_ns >= std::uint64_t{cfg_.peer_timeout_ms} * 1'000'000) {
    finish(ch, Status::Ok, true, now_ns);  // erased at the end of the next poll/tick
  }
}

void ChannelManager::reap() {
  table_.reap([this](std::uint32_t id) { peer_keys_.forget(id); });
}

bool ChannelManager::credits_in(Channel& ch, std::uint32_t lane, const wire::Header& h, std::uint64_t now_ns) noexcept {
  Lane& l = ch.lanes[lane];
  credits_.received();
  if (!l.on_received(h.type == wire::MsgType::Credit, h.credit)) {
    spdlog::warn("channel {} lane {}: grant of {} credits exceeds the peer's {} (we hold {}); failing the channel",
                 ch.id, lane, h.credit, l.peer_credits(), l.stats().credits);
    fail(ch, Status::ProtocolError, now_ns);
    return false;
  }
  if (h.credit == 0) return true;
  if (l.waiting()) flush(ch, lane);
  // A grant due earlier that found us without any credit goes now.
  if (credits_.grant_due(l) && ch.usable()) (void)l.post_credit();  // else: the next grant or tick
  return true;
}

void ChannelManager::lane_credits_from_ack(Channel& ch, std::int32_t lane, const wire::Header& h,
                                           const std::byte* payload) {
  if (lane < 0 || h.status != Status::Ok || !ch.initiated) return;
  wire::Handshake remote;
  // A bad payload is refused by on_hello_ack itself; nothing to learn here.
  if (wire::decode_handshake({payload, h.payload_len}, remote) != wire::WireError::None) return;
  const auto i = static_cast<std::uint32_t>(lane);
  credits_.answered(ch.lanes[i], remote);
  // The channel may have gone Up before this ack (channel_manager.cpp
  // on_recv): WRs posted meanwhile wait in the backlog for these credits.
  if (ch.lanes[i].waiting()) flush(ch, i);
}

void ChannelManager::flush(Channel& ch, std::uint32_t lane) noexcept {
  if (!ch.usable()) return;
  // Refused for good: the connection is closing under us. Its WRs are kept;
  // a rebuilt connection takes them.
  if (ch.lanes[lane].flush(last_now_ns_) == Flush::Refused) {
    break_lane(ch, lane, "the transport refused a post", last_now_ns_);
  }
}

bool ChannelManager::take_ack(Channel& ch, std::uint32_t lane, std::uint32_t ack, std::uint64_t now_ns) noexcept {
  Lane& l = ch.lanes[lane];
  if (!l.take_ack(ack)) {
    spdlog::warn("channel {} lane {}: the peer acks lane_seq {} but we sent up to {} (acked {}); failing the channel",
                 ch.id, lane, ack, l.tx_seq(), l.acked());
    fail(ch, Status::ProtocolError, now_ns);
    return false;
  }
  return ch.usable();
}

bool ChannelManager::rebuildable(Channel& ch, std::uint64_t now_ns) noexcept {
  if (!ch.usable() || ch.bootstrap == transport::kInvalidConn || ch.lane_count == 0 || !ch.lanes[0].is_open()) {
    return false;
  }
  if (now_ns - ch.rebuild_window_ns > kRebuildWindowNs) {
    ch.rebuild_window_ns = now_ns;
    ch.rebuilds_recent = 0;
  }
  return ch.rebuilds_recent < kMaxRebuilds;
}

void ChannelManager::break_lane(Channel& ch, std::uint32_t lane, std::string_view why, std::uint64_t now_ns) {
  if (ch.finished()) return;
  Lane& l = ch.lanes[lane];
  if (l.broken()) return;  // already being rebuilt
  bump(counters_.lane_breaks);
  if (!rebuildable(ch, now_ns)) {
    spdlog::warn("channel {} ({}) lane {}: {}; not rebuilding ({}), failing the channel", ch.id, ch.address, lane, why,
                 ch.usable() ? "too many rebuilds" : "the channel is not up");
    fail(ch, Status::PeerReset, now_ns);
    return;
  }
  ++ch.rebuilds_recent;
  spdlog::warn("channel {} ({}) lane {}: {}; rebuilding the lane ({} unconfirmed and {} queued messages kept)", ch.id,
               ch.address.empty() ? "accepted" : ch.address, lane, why, l.stats().unconfirmed, l.stats().backlog);
  if (l.conn() != transport::kInvalidConn) {
    // Forgotten first: completions of its WRs then find no lane (they are
    // the ring's to settle) and its Closed fails nothing.
    table_.conns().erase(l.conn(), true);
    (void)lanes_.close(l.conn());  // the lane is rebuilt either way; EndpointClosed: gone already
  }
  // A pending connect leaves conn unset: no second dial before it fails
  // (lane_connect_failed moves redial_ns) or the budget runs out.
  l.break_conn(now_ns, now_ns + std::uint64_t{cfg_.connect_timeout_ms} * 1'000'000);
  if (ch.initiated) start_connect(ch, static_cast<std::int32_t>(lane), now_ns);
}

void ChannelManager::replay(Channel& ch, std::uint32_t lane, std::uint32_t peer_rx, std::uint64_t now_ns) {
  Lane& l = ch.lanes[lane];
  const std::uint32_t sent = l.tx_seq(), acked = l.acked();
  if (!l.replay(peer_rx)) {
    spdlog::warn("channel {} lane {}: rebuilt, but the peer says it got up to lane_seq {} (we sent {}, acked {})",
                 ch.id, lane, peer_rx, sent, acked);
    fail(ch, Status::ProtocolError, now_ns);
    return;
  }
  spdlog::info("channel {} lane {}: rebuilt; peer had lane_seq {}, {} messages go again", ch.id, lane, peer_rx,
               sent - peer_rx);
  flush(ch, lane);
}

void ChannelManager::rejoin_accept(Channel& ch, std::uint32_t lane, transport::ConnId conn, const wire::Header& h,
                                   const wire::Handshake& remote, bool on_lanes, std::uint64_t now_ns) {
  Lane& l = ch.lanes[lane];
  // The initiator gave up the old connection; we may not have noticed yet.
  if (!l.broken()) break_lane(ch, lane, "the peer replaced the lane's connection", now_ns);
  if (!ch.usable() || !l.broken()) {
    refuse(conn, h.token, Status::PeerReset, on_lanes);
    return;
  }
  l.rejoin(conn);
  note_peer_rail(ch, lane);
  table_.conns().set(conn, on_lanes, ConnTable::Ref{ch.id, static_cast<std::int32_t>(lane)});
  credits_.accepted(l, remote, handshake_sent(ch));
  send_hello(ch, conn, h.token, true, Status::Ok, on_lanes);  // rejoin ack: our own ack first, then data
  replay(ch, lane, h.ack, now_ns);
}

void ChannelManager::rejoin_ack(Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
                                std::uint64_t now_ns) {
  Lane& l = ch.lanes[lane];
  if (!l.broken() || l.conn() == transport::kInvalidConn) {
    fail(ch, Status::ProtocolError, now_ns);
    return;
  }
  if (h.status != Status::Ok) {
    spdlog::warn("channel {} ({}) lane {}: the peer refused the rebuilt lane ({})", ch.id, ch.address, lane,
                 to_string(h.status));
    fail(ch, Status::PeerReset, now_ns);
    return;
  }
  wire::Handshake remote;
  if (wire::decode_handshake({payload, h.payload_len}, remote) != wire::WireError::None ||
      remote.daemon_epoch != ch.peer_epoch) {
    fail(ch, Status::PeerReset, now_ns);  // not the daemon instance we had: a restart
    return;
  }
  credits_.answered(l, remote);
  l.rejoin(l.conn());
  note_peer_rail(ch, lane);
  replay(ch, lane, h.ack, now_ns);
}

bool ChannelManager::idle(const Channel& ch) {
  if (ch.state != ChannelState::Up || ch.endpoints != 0 || ch.superseded_by != 0) return false;
  for (std::uint32_t i = 0; i < ch.lane_count; ++i) {
    if (!ch.lanes[i].settled() || ch.lanes[i].broken()) return false;
  }
  return events_.channel_idle(ch);
}

void ChannelManager::evict_idle(std::uint64_t now_ns) {
  const std::uint64_t patience_ns = std::uint64_t{cfg_.peer_timeout_ms} * 1'000'000;
  std::size_t open = 0;
  bool asking = false;
  Channel* idlest = nullptr;
  for (auto& [id, ch] : table_) {
    if (ch->finished()) continue;
    if (ch->evicting) {
      // Unanswered for a peer-timeout (an old peer, a lost message): kept.
      if (now_ns - ch->evict_since_ns > patience_ns) keep(*ch, now_ns);
      asking = true;  // one ask at a time
      continue;
    }
    ++open;
    // Only a channel we can dial again if our clients want it back.
    if (ch->address.empty() || ch->bootstrap == transport::kInvalidConn) continue;
    if (ch->evict_refused_ns != 0 && now_ns - ch->evict_refused_ns < patience_ns) continue;
    if (idlest != nullptr && ch->last_active_ns >= idlest->last_active_ns) continue;
    if (idle(*ch)) idlest = ch.get();
  }
  if (asking || open <= cfg_.max_channels || idlest == nullptr) return;
  wire::Header ask;
  ask.type = wire::MsgType::Goodbye;
  ask.status = Status::Ok;
  ask.token = kIdleClose;
  if (!post_on_bootstrap(transport_, *idlest, ask)) return;  // the next tick asks again
  idlest->evicting = true;
  idlest->wanted = false;
  idlest->evict_since_ns = now_ns;
  changed_ = true;
  spdlog::info("channel {} ({}): {} channels open, cap {}: asking the peer to close this idle one", idlest->id,
               idlest->address, open, cfg_.max_channels);
}

void ChannelManager::on_idle_close(Channel& ch, Status status, std::uint64_t now_ns) {
  if (status != Status::Ok) {
    spdlog::info("channel {} ({}): the peer keeps it ({})", ch.id, ch.address.empty() ? "accepted" : ch.address,
                 to_string(status));
    keep(ch, now_ns);
    return;
  }
  if (ch.evicting) {  // both asked at once: both close
    evicted(ch, now_ns);
    return;
  }
  if (!idle(ch)) {
    wire::Header no;
    no.type = wire::MsgType::Goodbye;
    no.status = Status::Busy;
    no.token = kIdleClose;
    // Not taken: the peer's ask times out and it keeps the channel too.
    (void)post_on_bootstrap(transport_, ch, no);
    return;
  }
  spdlog::info("channel {} ({}): closed at the peer's request (idle, over its channel cap)", ch.id,
               ch.address.empty() ? "accepted" : ch.address);
  bump(counters_.channels_evicted);
  if (!ch.address.empty()) table_.addresses().at(ch.address).evicted = true;
  finish(ch, Status::Ok, true, now_ns);
}

void ChannelManager::evicted(Channel& ch, std::uint64_t now_ns) {
  bump(counters_.channels_evicted);
  spdlog::info("channel {} ({}): evicted (idle, over the cap of {} channels){}", ch.id,
               ch.address.empty() ? "accepted" : ch.address, cfg_.max_channels,
               ch.wanted ? "; an Open waits: dialling a new channel" : "");
  if (!ch.address.empty()) {
    table_.addresses().route(ch.address, 0);
    table_.addresses().at(ch.address).evicted = true;
    // The Opens waiting for this channel move to the new one in
    // on_channel_down (RemoteSender::channel_down takes the successor).
    if (ch.wanted) (void)connect(ch.address, ch.host, ch.port, now_ns);  // a failure fails those Opens there
  }
  finish(ch, Status::Ok, true, now_ns);
}

void ChannelManager::keep(Channel& ch, std::uint64_t now_ns) {
  ch.evicting = false;
  ch.evict_refused_ns = now_ns;
  changed_ = true;
  if (ch.wanted) {
    ch.wanted = false;
    events_.on_channel_up(ch);  // the Opens that waited go now
  }
}

}  // namespace ferry::daemon::peer
