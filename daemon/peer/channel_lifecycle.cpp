// A channel's life once it is set up: heartbeats and deadlines (each tick),
// and failing or ending it. What its lanes do meanwhile (grants, acks,
// breaking and replaying) is LaneFlow's (lane_flow.h); the rejoin Hello of
// a rebuilt lane is the handshake's (channel_handshake.h).
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
  flow_.tick(ch, now_ns);  // rebuild deadlines, the retransmission timeout, idle grants
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
    flow_.break_lane(ch, i, fmt::format("rail {} is back; moving the lane from rail {} to it", want, now_on), now_ns);
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
  // So is a lane dial refused here for want of a slot (Busy): ours, not the
  // peer's, and counted in peer_dials_refused.
  if (why != Status::Busy) bump(ch.proven() ? counters_.peer_failures : counters_.peer_bootstrap_refusals);
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
