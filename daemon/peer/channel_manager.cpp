// ChannelManager: connect (get-or-create), accept, the completion pump,
// posting on a lane, and the status snapshot.
#include "daemon/peer/channel_manager.h"

#include "daemon/peer/heartbeat.h"

#include <spdlog/spdlog.h>

#include <arpa/inet.h>

#include <algorithm>

#include "daemon/rails/rail_set.h"
#include "ferry_config.h"
#include "transport/wire/rail_keys.h"

namespace ferry::daemon::peer {

ChannelManager::ChannelManager(transport::Transport& t, ChannelEvents& events, const ChannelConfig& cfg,
                               Counters& counters, transport::Transport* lanes)
    : transport_(t),
      lanes_(lanes != nullptr ? *lanes : t),
      split_(lanes != nullptr && lanes != &t),
      events_(events),
      cfg_(cfg),
      counters_(counters),
      credits_(lanes_.caps(), CreditConfig{cfg.credit_floor, cfg.credit_share, cfg.receive_pool}),
      table_(split_),
      flow_(*this, credits_, table_.conns(), lanes_, counters_,
            LaneFlowConfig{cfg.peer_timeout_ms, cfg.connect_timeout_ms}),
      handshake_(*this, HandshakeParts{table_, credits_, flow_, transport_, lanes_, split_, counters_, cfg_}) {
  if (cfg_.lanes == 0) cfg_.lanes = 1;
  if (cfg_.lanes > kMaxLanes) cfg_.lanes = kMaxLanes;
  handshake_.encode();  // with the lane count settled
}

ChannelManager::~ChannelManager() = default;

void ChannelManager::set_rails(rails::RailSet* rails) {
  rails_ = rails;
  std::uint8_t count = 0;
  std::array<std::uint32_t, wire::kMaxHandshakeRails> ipv4{};
#if FERRY_HAVE_RDMA
  if (rails_ != nullptr && rails_->count() > 1) {
    for (std::uint32_t i = 0; i < rails_->count() && i < ipv4.size(); ++i) {
      in_addr a{};
      if (inet_pton(AF_INET, rails_->info(i).address.c_str(), &a) != 1) break;  // resolve_rails checked them
      ipv4[i] = a.s_addr;
      count = static_cast<std::uint8_t>(i + 1);
    }
  }
#endif
  handshake_.set_rails(count, ipv4);
}

std::uint32_t ChannelManager::rail_of_lane(std::uint32_t channel, std::uint32_t lane) noexcept {
  if (rails_ == nullptr || lane >= kMaxLanes) return 0;
  const Channel* ch = find(channel);
  if (ch == nullptr) return 0;
  const transport::ConnId c = ch->lanes[lane].conn();
  return c == transport::kInvalidConn ? 0 : rails::RailSet::rail_of(c);
}

void ChannelManager::note_peer_rail(Channel& ch, std::uint32_t lane) {
  Lane& l = ch.lanes[lane];
  l.set_peer_rail(Lane::kNoPeerRail);
  if (ch.peer_rail_count == 0 || l.conn() == transport::kInvalidConn) return;  // a one-rail peer: no table
  const std::string host = lanes_.peer_address(l.conn());
  in_addr a{};
  if (host.empty() || inet_pton(AF_INET, host.c_str(), &a) != 1) return;
  for (std::uint32_t i = 0; i < ch.peer_rail_count && i < ch.peer_rails.size(); ++i) {
    if (ch.peer_rails[i] == a.s_addr) {
      l.set_peer_rail(static_cast<std::uint8_t>(i));
      return;
    }
  }
  spdlog::debug("channel {} lane {}: peer address {} is none of its rails; its requests' own keys are used", ch.id,
                lane, host);
}

void ChannelManager::on_rail_keys(Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload) {
  wire::RailKeys rk;
  const wire::WireError e = wire::decode_rail_keys({payload, h.payload_len}, h.aux, rk);
  if (e != wire::WireError::None) {
    // The header rules passed it, so only its fields are wrong: the peer's
    // keys for that arena are not used (its requests' own keys are).
    spdlog::warn("channel {} lane {}: RailKeys refused ({}: {} rails, {} bytes); the requests' own keys are used",
                 ch.id, lane, to_string(e), h.aux, h.payload_len);
    bump(counters_.rail_keys_refused);
    return;
  }
  const std::uint32_t replaced = peer_keys_.learn(ch.id, rk);
  bump(counters_.rail_keys_learned);
  spdlog::debug("channel {} lane {}: peer arena [{:#x}, +{}) keys on {} rails{}", ch.id, lane, rk.addr, rk.length,
                rk.rails, replaced != 0 ? fmt::format(" (replaces {})", replaced) : std::string());
}

Result<std::uint16_t> ChannelManager::listen(std::string_view host, std::uint16_t port) {
  auto r = transport_.listen(host, port);
  if (!r) return r;
  cfg_.listen_port = r.value;
  if (split_) {
    // Peers reach our lanes at the bootstrap port, in the lane transport's
    // own port space (rdma_cm), so the Hello needs no second port.
    auto l = lanes_.listen(host, r.value);
    if (!l) return l;
  }
  return r;
}

Channel& ChannelManager::create(bool initiated, std::uint64_t now_ns) {
  auto made = std::make_unique<Channel>();
  Channel* ch = made.get();
  ch->initiated = initiated;
  ch->created_ns = ch->state_since_ns = ch->last_heard_ns = now_ns;
  ch->deadline_ns = now_ns + std::uint64_t{cfg_.connect_timeout_ms} * 1'000'000;
  ch->next_ping_ns = now_ns + std::uint64_t{cfg_.heartbeat_ms} * 1'000'000;
  for (Lane& l : ch->lanes) l.attach(lanes_, events_, counters_, &credits_.pool());
  changed_ = true;
  return table_.add(std::move(made));
}

Result<std::uint32_t> ChannelManager::connect(const std::string& address, std::string_view host, std::uint16_t port,
                                              std::uint64_t now_ns) {
  if (AddressBook::Entry* e = table_.addresses().find(address)) {
    if (e->channel != 0) {
      if (Channel* ch = route(e->channel)) return Result<std::uint32_t>::ok(ch->id);
      Channel* ch = find(e->channel);
      if (ch != nullptr && !ch->finished()) {
        // Still handshaking, or being evicted: the Open waits for it (or
        // for the channel that replaces it).
        if (ch->evicting) ch->wanted = true;
        return Result<std::uint32_t>::ok(ch->id);
      }
      e->channel = 0;
    }
    if (e->redial.waits(now_ns)) {
      bump(counters_.redials_deferred);
      return Result<std::uint32_t>::fail(Status::PeerUnreachable);
    }
  }
  if (now_ns < no_slot_until_ns_) return Result<std::uint32_t>::fail(Status::Busy);  // no slot: no dial yet
  if (AddressBook::Entry* e = table_.addresses().find(address); e != nullptr && e->evicted) {
    e->evicted = false;
    bump(counters_.channels_reopened);
  }
  Channel& ch = create(true, now_ns);
  ch.address = address;
  ch.host = std::string(host);
  ch.port = port;
  spdlog::info("channel {} to {}: {}", ch.id, address, to_string(ch.state));
  table_.addresses().route(address, ch.id);  // later Opens to it join this channel while it connects
  if (!handshake_.start(ch)) {
    fail(ch, Status::PermissionDenied, now_ns);
    return Result<std::uint32_t>::fail(Status::PermissionDenied);
  }
  if (const Status st = start_connect(ch, -1, now_ns); st != Status::Ok) return Result<std::uint32_t>::fail(st);
  return Result<std::uint32_t>::ok(ch.id);
}

LaneStats& ChannelManager::stats_of(Channel& ch, std::int32_t lane) noexcept {
  if (lane < 0) return ch.bootstrap_stats;
  return ch.lanes[static_cast<std::uint32_t>(lane)].traffic();
}

std::size_t ChannelManager::poll(std::uint64_t now_ns) noexcept {
  last_now_ns_ = now_ns;
  std::size_t n = 0;
  // The bootstrap transport every turn only while it carries lanes with
  // channels on them; otherwise (rdma lanes, or no channel at all, only a
  // listener) every kControlPollEvery-th turn and after each sleep: each
  // look is a syscall, which a spinning engine would pay every turn.
  const bool carries_traffic = !split_ && !table_.empty();
  if (carries_traffic || control_due_ || closing_ || ++polls_ % kControlPollEvery == 0) {
    control_due_ = false;
    n += drain(false, now_ns);
  }
  if (split_) n += drain(true, now_ns);
  if (!held_.empty()) n += held_.flush(*this);
  if (table_.has_retired()) reap();
  return n;
}

void ChannelManager::answer(std::uint32_t channel, std::uint32_t lane, std::uint32_t dst_ep, std::uint64_t token,
                            Status status) noexcept {
  Channel* ch = find(channel);
  if (ch == nullptr || !ch->usable()) return;  // the caller's daemon fails the op itself
  wire::Header h;
  h.type = wire::MsgType::Response;
  h.status = status;
  h.dst_ep = dst_ep;
  h.token = token;
  send_control(*ch, lane, h);
}

bool ChannelManager::prepare_to_sleep() noexcept {
  const bool control = transport_.prepare_to_sleep();
  const bool lanes = !split_ || lanes_.prepare_to_sleep();
  return control && lanes;
}

std::size_t ChannelManager::drain(bool on_lanes, std::uint64_t now_ns) noexcept {
  const std::size_t n = via(on_lanes).poll(batch_);
  // That poll reposted the receives used before it: grant them now, before
  // this batch's Recvs use more (granting those waits for the next poll).
  if (&via(on_lanes) == &lanes_) credits_.reposted(table_, now_ns);
  for (std::size_t i = 0; i < n; ++i) {
    const transport::Completion& c = batch_[i];
    switch (c.kind) {
      case transport::CompletionKind::Accepted:
        table_.conns().set(c.conn, on_lanes, ConnTable::Ref{0, -1});
        handshake_.send_challenge(c.conn, on_lanes);  // auth: the nonce this connection's Hello must prove over
        break;
      case transport::CompletionKind::Recv: on_recv(c, on_lanes, now_ns); break;
      case transport::CompletionKind::SendDone: on_send_done(c, on_lanes, now_ns); break;
      case transport::CompletionKind::Closed: on_closed(c, on_lanes); break;
      case transport::CompletionKind::Connected: on_connected(c, on_lanes, now_ns); break;
    }
  }
  return n;
}

void ChannelManager::on_send_done(const transport::Completion& c, bool on_lanes, std::uint64_t now_ns) {
  const ConnTable::Ref* found = table_.conns().find(c.conn, on_lanes);
  if (found == nullptr) {
    // A lane connection already dropped (break_lane, finish): every WR it
    // carried is in its lane's ring, settled there. Others carry none.
    return;
  }
  const ConnTable::Ref ref = *found;
  Channel* ch = ref.channel == 0 || ref.lane < 0 ? nullptr : find(ref.channel);
  if (ch != nullptr && ch->usable() && ch->lanes[static_cast<std::uint32_t>(ref.lane)].is_open()) {
    const auto lane = static_cast<std::uint32_t>(ref.lane);
    if (c.status != Status::Ok) {
      // A failed WR means the connection is gone (QP in error, socket dead):
      // nothing the WR names is lost, it goes again on the rebuilt lane.
      flow_.break_lane(*ch, lane, fmt::format("a WR failed ({})", to_string(c.status)), now_ns);
      return;
    }
    ch->lanes[lane].send_done(c.user_data);
    return;
  }
  events_.on_send_done(c.user_data, c.status);  // handshake and bootstrap WRs (user_data 0)
}

void ChannelManager::on_recv(const transport::Completion& c, bool on_lanes, std::uint64_t now_ns) {
  const ConnTable::Ref* found = table_.conns().find(c.conn, on_lanes);
  if (found == nullptr) {
    spdlog::debug("{} on connection {}, which is not (or no longer) ours: dropped", to_string(c.header.type), c.conn);
    return;  // a connection we already let go of
  }
  const ConnTable::Ref ref = *found;
  if (ref.channel == 0) {
    // First message on an accepted connection: must be Hello.
    if (c.header.type == wire::MsgType::Hello) {
      handshake_.on_hello(c.conn, c.header, c.payload, on_lanes, now_ns);
    } else {
      spdlog::warn("peer connection: {} before Hello; closing it", to_string(c.header.type));
      table_.conns().erase(c.conn, on_lanes);
      (void)via(on_lanes).close(c.conn);  // a stranger's connection; EndpointClosed: gone already
    }
    return;
  }
  Channel* ch = find(ref.channel);
  if (ch == nullptr || ch->finished()) return;
  ch->last_heard_ns = now_ns;
  ch->missed = 0;
  LaneStats& st = stats_of(*ch, ref.lane);
  ++st.rx_msgs;
  st.rx_bytes += wire::kHeaderBytes + c.header.payload_len;
  if (c.header.type == wire::MsgType::Goodbye && c.header.status == Status::Busy && c.header.token == 0 &&
      turned_away(*ch, ref.lane, c.conn, now_ns)) {
    return;
  }
  if (ref.lane >= 0 && !flow_.credits_in(*ch, static_cast<std::uint32_t>(ref.lane), c.header, now_ns)) return;
  switch (c.header.type) {
    case wire::MsgType::HelloAck: handshake_.on_hello_ack(*ch, ref.lane, c.header, c.payload, now_ns); return;
    case wire::MsgType::Heartbeat: {
      wire::Header pong;
      // A pong not taken: the peer's next ping gets one.
      if (take_heartbeat(*ch, c.header, now_ns, pong)) (void)post_on_bootstrap(transport_, *ch, pong);
      return;
    }
    case wire::MsgType::Goodbye:
      if (c.header.token == kIdleClose) {
        on_idle_close(*ch, c.header.status, now_ns);
        return;
      }
      if (ch->evicting) {
        evicted(*ch, now_ns);
        return;
      }
      if (c.header.status == Status::PermissionDenied) {
        // The peer checked our proof (or our lack of one) and refused it.
        spdlog::warn("channel {} ({}): authentication failed: the peer refused our proof (the auth secrets differ?)",
                     ch->id, ch->address.empty() ? "accepted" : ch->address);
        bump(counters_.peer_auth_failures);
        fail(*ch, Status::PermissionDenied, now_ns);
        return;
      }
      spdlog::info("channel {} ({}): peer said Goodbye ({})", ch->id, ch->address, to_string(c.header.status));
      finish(*ch, Status::PeerReset, true, now_ns);
      return;
    case wire::MsgType::Hello: fail(*ch, Status::ProtocolError, now_ns); return;
    case wire::MsgType::Challenge: handshake_.on_challenge(*ch, ref.lane, c, now_ns); return;
    default: break;
  }
  if (ch->state == ChannelState::Handshaking && ch->initiated && ref.lane >= 0 &&
      ch->lanes[static_cast<std::uint32_t>(ref.lane)].joined()) {
    // Data on a joined lane of ours while others still wait for their
    // HelloAck: the acceptor sends data only once every lane joined on its
    // side, so those acks are already on their way (TCP orders each
    // connection, not across connections). The channel is Up; the late acks
    // are accepted by on_hello_ack.
    for (std::uint32_t i = 0; i < ch->lane_count; ++i) {
      if (!ch->lanes[i].joined()) {
        ch->lanes[i].join();
        note_peer_rail(*ch, i);
      }
    }
    become_up(*ch, now_ns);
  }
  if (!ch->usable() || ref.lane < 0) {
    // Traffic before the handshake finished, or data on the bootstrap
    // connection: the peer does not follow the protocol.
    spdlog::warn("channel {}: {} on the {} in state {}", ch->id, to_string(c.header.type),
                 ref.lane < 0 ? "bootstrap connection" : "data lane", to_string(ch->state));
    fail(*ch, Status::ProtocolError, now_ns);
    return;
  }
  on_lane_message(*ch, static_cast<std::uint32_t>(ref.lane), c, now_ns);
}

bool ChannelManager::turned_away(Channel& ch, std::int32_t lane, transport::ConnId conn, std::uint64_t now_ns) {
  const bool rebuilding = lane >= 0 && ch.usable() && ch.lanes[static_cast<std::uint32_t>(lane)].broken() &&
                          ch.lanes[static_cast<std::uint32_t>(lane)].conn() == conn;
  // Only a connection we dialled and the peer never admitted: else a plain Goodbye.
  if (!ch.initiated || (!rebuilding && (ch.usable() || ch.was_up))) return false;
  bump(counters_.peer_full_refusals);
  if (std::uint64_t unlogged = 0; peer_full_log_.allow(now_ns, unlogged)) {
    const bool qp = lane >= 0 && split_ && lanes_kind() == transport::TransportKind::Rdma;
    spdlog::warn("channel {} to {}: the peer turned our {} connection away: no free {} slot there{}", ch.id,
                 ch.address.empty() ? "accepted" : ch.address, lane >= 0 ? "lane" : "bootstrap",
                 qp ? "rdma-max-connections" : "peer-max-connections",
                 unlogged == 0 ? std::string() : fmt::format(" ({} more such since the last line)", unlogged));
  }
  if (rebuilding) {
    (void)via(true).close(conn);  // EndpointClosed: the peer closed it first
    lane_connect_failed(ch, static_cast<std::uint32_t>(lane), Status::Busy, now_ns);  // dialled again later
    return true;
  }
  fail(ch, Status::Busy, now_ns);  // its Opens wait for room (RemoteSender::channel_down)
  return true;
}

void ChannelManager::on_lane_message(Channel& ch, std::uint32_t lane, const transport::Completion& c,
                                     std::uint64_t now_ns) {
  if (!flow_.admit(ch, lane, c, now_ns)) return;
  ch.last_active_ns = now_ns;
  events_.on_message(ch, lane, c.header, c.payload);
}

void ChannelManager::on_closed(const transport::Completion& c, bool on_lanes) {
  if (&via(on_lanes) == &via(false)) {  // a bootstrap transport slot is free again
    no_slot_until_ns_ = 0;
    if (slot_wanted_) {
      slot_wanted_ = false;
      events_.on_slot_freed();
    }
  }
  handshake_.closed(c.conn, on_lanes);  // no WR of the connection points at its nonce any more
  const ConnTable::Ref* found = table_.conns().find(c.conn, on_lanes);
  if (found == nullptr) return;
  const ConnTable::Ref ref = *found;
  table_.conns().erase(c.conn, on_lanes);
  if (ref.channel == 0) return;
  Channel* ch = find(ref.channel);
  if (ch == nullptr || ch->finished()) return;
  // A dial the peer rejected for want of a slot (rdma: the reject's reason,
  // transport/rdma/cm_reject.h): as a tcp connection it answers Goodbye(Busy).
  if (c.status == Status::Busy && turned_away(*ch, ref.lane, c.conn, last_now_ns_)) return;
  if (ref.lane >= 0 && ch->usable()) {
    // A data lane of a channel that is Up: rebuilt through the bootstrap
    // connection (LaneFlow, the rejoin handshake), or the channel fails if it cannot.
    Lane& l = ch->lanes[static_cast<std::uint32_t>(ref.lane)];
    if (l.broken() && l.conn() == c.conn) {  // the new connection of a rebuild failed (connect_async)
      lane_connect_failed(*ch, static_cast<std::uint32_t>(ref.lane), Status::PeerUnreachable, last_now_ns_);
      return;
    }
    if (l.conn() == c.conn) l.set_conn(transport::kInvalidConn);  // gone already: nothing to close
    flow_.break_lane(*ch, static_cast<std::uint32_t>(ref.lane),
                     fmt::format("connection closed ({})", to_string(c.status)), last_now_ns_);
    return;
  }
  // The bootstrap connection (liveness) or a lane still handshaking: the
  // channel goes with it.
  const bool setting_up = ch->state == ChannelState::Connecting || ch->state == ChannelState::Handshaking;
  const Status why = setting_up ? Status::PeerUnreachable : Status::PeerReset;
  spdlog::log(ch->proven() ? spdlog::level::warn : spdlog::level::debug,  // a stranger leaving: counted, not logged
              "channel {} ({}): {} connection closed ({})", ch->id, ch->address, ref.lane < 0 ? "bootstrap" : "data",
              to_string(c.status));
  fail(*ch, why, last_now_ns_);
}

transport::PostResult ChannelManager::send(Channel& ch, std::uint32_t lane, const wire::Header& h,
                                           const std::byte* payload, std::uint32_t len, std::uint64_t user_data,
                                           bool signaled, transport::MemoryHandle local) noexcept {
  transport::SendWr wr;
  wr.header = h;
  wr.payload = payload;
  wr.payload_len = len;
  wr.user_data = user_data;
  wr.signaled = signaled;
  wr.local = local;
  return post(ch, lane, wr);
}

bool ChannelManager::has_room(const Channel& ch, std::uint32_t lane) const noexcept {
  if (!ch.usable() || ch.lane_count == 0) return true;  // post() reports PeerReset, not Busy
  return ch.lanes[lane % ch.lane_count].has_room();
}

transport::PostResult ChannelManager::post(Channel& ch, std::uint32_t lane, transport::SendWr wr) noexcept {
  if (!ch.usable() || ch.lane_count == 0) return transport::PostResult{0, Status::PeerReset};
  ch.last_active_ns = last_now_ns_;
  return ch.lanes[lane % ch.lane_count].post(wr, last_now_ns_);
}

void ChannelManager::close_all() {
  closing_ = true;
  for (auto& [id, ch] : table_) {
    if (!ch->finished()) finish(*ch, Status::Ok, true, last_now_ns_);
  }
  reap();
}

void ChannelManager::snapshot(std::vector<PeerInfo>& out, std::uint64_t now_ns) const {
  out.clear();
  for (const auto& [id, ch] : table_) {
    PeerInfo p;
    p.channel = ch->id;
    p.address = ch->address;
    p.epoch = ch->peer_epoch;
    p.state = ch->state;
    p.lane_count = ch->lane_count;
    for (std::uint32_t i = 0; i < ch->lane_count; ++i) {
      p.lanes[i] = ch->lanes[i].snapshot();
      p.lane_ids[i] = ch->lanes[i].conn();
    }
    p.rnr_naks = read(counters_.rnr_naks);
    p.endpoints = ch->endpoints;
    p.rtt_us = ch->rtt_us;
    p.since_s = (now_ns - ch->state_since_ns) / 1'000'000'000;
    p.initiated = ch->initiated;
    p.transport = lanes_.kind();
    out.push_back(std::move(p));
  }
}

}  // namespace ferry::daemon::peer
