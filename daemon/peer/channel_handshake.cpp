// The channel handshake: see channel_handshake.h.
#include "daemon/peer/channel_handshake.h"

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "daemon/peer/heartbeat.h"
#include "daemon/peer/hello_proof.h"

namespace ferry::daemon::peer {

ChannelHandshake::ChannelHandshake(HandshakeHost& host, const HandshakeParts& parts)
    : host_(host),
      table_(parts.table),
      credits_(parts.credits),
      flow_(parts.flow),
      bootstrap_(parts.bootstrap),
      lanes_(parts.lanes),
      split_(parts.split),
      counters_(parts.counters),
      cfg_(parts.cfg),
      auth_(parts.cfg.auth_secret, parts.cfg.epoch),
      challenges_(parts.split) {}

void ChannelHandshake::set_rails(std::uint8_t count, const std::array<std::uint32_t, wire::kMaxHandshakeRails>& ipv4) {
  rail_count_ = count;
  rail_ipv4_ = ipv4;
  encode();
}

wire::Handshake ChannelHandshake::local() const noexcept {
  wire::Handshake hs;
  hs.protocol_version = wire::kProtocolVersion;
  hs.qp_count = static_cast<std::uint16_t>(cfg_.lanes);
  hs.daemon_epoch = cfg_.epoch;
  hs.capabilities =
      lanes_.kind() == transport::TransportKind::Rdma ? wire::kCapRdma | wire::kCapRailKeys : wire::kCapTcp;
  credits_.offer(hs);
  hs.max_message_bytes = cfg_.max_message_bytes;
  if (auth_.on()) hs.capabilities |= wire::kCapAuth;
  hs.rail_count = rail_count_;
  hs.rail_ipv4 = rail_ipv4_;
  return hs;
}

bool ChannelHandshake::same_data_path(const wire::Handshake& remote) const noexcept {
  const std::uint64_t ours = local().capabilities & (wire::kCapTcp | wire::kCapRdma);
  return (remote.capabilities & ours) != 0;
}

void ChannelHandshake::send_hello(Channel& ch, transport::ConnId conn, std::uint64_t token, bool ack, Status status,
                                  bool on_lanes) {
  wire::Header h;
  h.type = ack ? wire::MsgType::HelloAck : wire::MsgType::Hello;
  h.status = status;
  h.token = token;
  // The bootstrap Hello carries our --listen port in `ack` (unused before
  // any data flows): with the connection's source address it names us the
  // way the peer's clients do ("HOST:PORT/SERVICE"), so the peer reuses this
  // channel for its own Opens to us instead of building a duplicate.
  if (!ack && token == 0) h.ack = cfg_.listen_port;
  // A lane handshake on a channel already Up replaces a broken lane
  // (channel_lifecycle.cpp): it says so, with the last lane_seq we got there.
  if (token != 0 && token <= kMaxLanes && ch.usable()) {
    h.flags = wire::kFlagRetransmit;
    h.ack = ch.lanes[token - 1].rx_seq();
  }
  transport::SendWr wr;
  wr.conn = conn;
  wr.header = h;
  // A lane's handshake with auth carries a proof bound to its connection;
  // else a channel with its own payload (auth: nonce, proof) sends that one.
  const bool lane_own = auth_.encode_lane(ch, challenges_.find(conn, on_lanes), h, local());
  const bool own = ch.hello_len != 0;
  wr.payload = lane_own ? ch.lane_auth[token - 1].hello.data() : own ? ch.hello.data() : hello_.data();
  wr.payload_len = lane_own ? ch.lane_auth[token - 1].hello_len : own ? ch.hello_len : hello_len_;
  wr.signaled = false;
  const auto r = via(on_lanes).post_send(std::span<const transport::SendWr>(&wr, 1));
  // Not taken: the connection is closing; its Closed ends what waits for it.
  if (r.accepted == 1) {
    ++ch.bootstrap_stats.tx_msgs;
    ch.bootstrap_stats.tx_bytes += wire::kHeaderBytes + wr.payload_len;
  }
}

void ChannelHandshake::refuse(transport::ConnId conn, std::uint64_t token, Status status, bool on_lanes) {
  Channel scratch;  // stats of a refused connection are not kept
  send_hello(scratch, conn, token, true, status, on_lanes);
  table_.conns().erase(conn, on_lanes);
  (void)via(on_lanes).close(conn);  // refused and forgotten; EndpointClosed: gone already
}

void ChannelHandshake::on_hello(transport::ConnId conn, const wire::Header& h, const std::byte* payload, bool on_lanes,
                                std::uint64_t now_ns) {
  // Anyone who reaches the port can send a bootstrap Hello: what it causes
  // before the peer proves itself is logged at most once per 10 s.
  std::uint64_t unlogged = 0;
  const bool loud = h.token != 0 || stranger_log_.allow(unlogged);
  const std::string more =
      unlogged == 0 ? std::string() : fmt::format(" ({} more bootstrap Hellos since the last such line)", unlogged);
  wire::Handshake remote;
  const wire::WireError e = wire::decode_handshake({payload, h.payload_len}, remote);
  if (e != wire::WireError::None) {
    if (loud) spdlog::warn("peer Hello rejected: {}{}", to_string(e), more);
    refuse(conn, h.token, wire::to_status(e), on_lanes);
    return;
  }
  wire::Negotiated n;
  if (wire::negotiate(local(), remote, n) != wire::WireError::None) {
    if (loud)
      spdlog::warn("peer Hello rejected: protocol version {} (we speak {}){}", remote.protocol_version,
                   wire::kProtocolVersion, more);
    refuse(conn, h.token, Status::VersionMismatch, on_lanes);
    return;
  }
  if (remote.daemon_epoch == cfg_.epoch) {
    if (loud) spdlog::warn("peer Hello rejected: it carries our own epoch (connected to ourselves){}", more);
    refuse(conn, h.token, Status::BadRequest, on_lanes);
    return;
  }
  if (split_ && (h.token == 0) == on_lanes) {
    // A bootstrap Hello must come on the bootstrap transport, a lane's on the lanes'.
    if (loud)
      spdlog::warn("peer Hello for {} arrived on the {} transport; refused{}", h.token == 0 ? "a bootstrap" : "a lane",
                   on_lanes ? "lane" : "bootstrap", more);
    refuse(conn, h.token, Status::ProtocolError, on_lanes);
    return;
  }
  if (h.token == 0 && !same_data_path(remote)) {
    if (loud)
      spdlog::warn("peer Hello rejected: its data lanes run on {}, ours on {} (start both with the same --transport){}",
                   (remote.capabilities & wire::kCapRdma) != 0 ? "rdma" : "tcp", to_string(lanes_.kind()), more);
    refuse(conn, h.token, Status::NotSupported, on_lanes);
    return;
  }
  if (h.token == 0 && !auth_.check_hello(remote, loud)) {
    bump(counters_.peer_auth_failures);
    bump(counters_.peer_bootstrap_refusals);
    refuse(conn, 0, Status::PermissionDenied, on_lanes);
    return;
  }
  if (h.token == 0) {
    Channel& ch = host_.create_channel(false, now_ns);
    ch.bootstrap = conn;
    ch.peer_epoch = remote.daemon_epoch;
    ch.negotiated = n;
    ch.lane_count = n.qp_count < kMaxLanes ? n.qp_count : kMaxLanes;
    // Its rails: where its lanes come from, so each lane knows which of its
    // arena keys (RailKeys) a READ or WRITE on it needs (note_peer_rail).
    ch.peer_rails = remote.rail_ipv4;
    ch.peer_rail_count = remote.rail_count;
    table_.conns().set(conn, false, ConnTable::Ref{ch.id, -1});
    if (h.ack != 0 && h.ack <= 0xFFFF) {
      const std::string host = bootstrap_.peer_address(conn);
      if (!host.empty()) {
        ch.host = host;
        ch.port = static_cast<std::uint16_t>(h.ack);
        ch.address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(ch.port);
        table_.addresses().route_if_free(ch.address, ch.id);  // an Open of ours already under way keeps its channel
      }
    }
    if (loud)
      spdlog::info("channel {} from peer epoch {:#018x}: {}{}", ch.id, ch.peer_epoch, to_string(ch.state), more);
    host_.set_state(ch, ChannelState::Handshaking, now_ns);
    if (!auth_.accept(ch, remote, local())) {
      host_.fail_channel(ch, Status::PermissionDenied, now_ns);
      return;
    }
    send_hello(ch, conn, 0, true, Status::Ok, false);
    return;
  }
  on_lane_hello(conn, h, remote, on_lanes, now_ns);
}

void ChannelHandshake::on_lane_hello(transport::ConnId conn, const wire::Header& h, const wire::Handshake& remote,
                                     bool on_lanes, std::uint64_t now_ns) {
  const std::uint64_t lane = h.token - 1;
  if ((h.flags & wire::kFlagRetransmit) != 0) {
    // A rejoin: a new connection for a lane of a channel that is Up.
    for (auto& [id, ch] : table_) {
      if (ch->initiated || ch->peer_epoch != remote.daemon_epoch || !ch->usable() || lane >= ch->lane_count) continue;
      if (!auth_.names(*ch, remote)) continue;
      if (!auth_.check_lane_hello(*ch, challenges_.find(conn, on_lanes), h, remote)) {
        lane_proof_refused(*ch, conn, h, on_lanes);
        return;
      }
      ch->lane_auth[lane].conn_nonce = remote.conn_nonce;  // our HelloAck's proof covers it
      via(on_lanes).vouch(conn);  // the transport's limits on unauthenticated connections end here
      rejoin_accept(*ch, static_cast<std::uint32_t>(lane), conn, h, remote, on_lanes, now_ns);
      return;
    }
    spdlog::warn("peer rejoin Hello for lane {} matches no channel that is up; refused", lane);
    refuse(conn, h.token, Status::PeerReset, on_lanes);
    return;
  }
  for (auto& [id, ch] : table_) {
    if (ch->initiated || ch->peer_epoch != remote.daemon_epoch || ch->state != ChannelState::Handshaking) continue;
    if (lane >= ch->lane_count || ch->lanes[lane].joined()) continue;
    // With auth, the lane names its channel by the initiator's nonce and
    // joins only with the initiator's proof: nothing flows before it.
    if (!auth_.names(*ch, remote)) continue;
    if (!auth_.check_lane_hello(*ch, challenges_.find(conn, on_lanes), h, remote)) {
      lane_proof_refused(*ch, conn, h, on_lanes);
      return;
    }
    ch->lane_auth[lane].conn_nonce = remote.conn_nonce;  // our HelloAck's proof covers it
    Lane& l = ch->lanes[lane];
    l.set_conn(conn);
    l.join();
    host_.note_peer_rail(*ch, lane);
    // A joined lane vouches for its channel (after the proof, with auth): the
    // transport's limits on unauthenticated connections end for both.
    via(on_lanes).vouch(conn);
    bootstrap_.vouch(ch->bootstrap);
    table_.conns().set(conn, on_lanes, ConnTable::Ref{ch->id, static_cast<std::int32_t>(lane)});
    credits_.accepted(l, remote, handshake_sent(*ch));
    send_hello(*ch, conn, h.token, true, Status::Ok, on_lanes);
    if (ch->all_lanes_joined()) host_.become_up(*ch, now_ns);
    return;
  }
  spdlog::warn("peer Hello for lane {} matches no channel being set up; refused", lane);
  refuse(conn, h.token, Status::ProtocolError, on_lanes);
}

void ChannelHandshake::on_hello_ack(Channel& ch, std::int32_t lane, const wire::Header& h, const std::byte* payload,
                                    std::uint64_t now_ns) {
  if (lane >= 0 && ch.initiated && !auth_.check_lane_ack(ch, static_cast<std::uint32_t>(lane), h, payload)) {
    auth_failed(ch, "a data lane's HelloAck proof does not match our secret or this connection", now_ns);
    return;
  }
  if (lane >= 0 && ch.initiated && ch.usable() && (h.flags & wire::kFlagRetransmit) != 0) {
    rejoin_ack(ch, static_cast<std::uint32_t>(lane), h, payload, now_ns);
    return;
  }
  lane_credits_from_ack(ch, lane, h, payload, now_ns);
  if (ch.initiated && lane >= 0 && ch.usable() && ch.lanes[static_cast<std::uint32_t>(lane)].joined()) {
    // A lane's ack overtaken by data on another lane (see on_recv): the
    // channel already went Up on the strength of that data.
    if (h.status != Status::Ok) host_.fail_channel(ch, h.status, now_ns);
    return;
  }
  if (!ch.initiated || ch.state != ChannelState::Handshaking) {
    host_.fail_channel(ch, Status::ProtocolError, now_ns);
    return;
  }
  if (h.status == Status::PermissionDenied) {
    spdlog::warn("channel {} ({}): authentication failed: the peer refused us (auth-secret-file on one side only?)",
                 ch.id, ch.address);
    bump(counters_.peer_auth_failures);
    host_.fail_channel(ch, h.status, now_ns);
    return;
  }
  if (h.status != Status::Ok) {
    spdlog::warn("channel {} ({}): peer refused the handshake ({})", ch.id, ch.address, to_string(h.status));
    host_.fail_channel(ch, h.status, now_ns);
    return;
  }
  wire::Handshake remote;
  const wire::WireError e = wire::decode_handshake({payload, h.payload_len}, remote);
  wire::Negotiated n;
  if (e != wire::WireError::None || wire::negotiate(local(), remote, n) != wire::WireError::None) {
    host_.fail_channel(ch, e == wire::WireError::None ? Status::VersionMismatch : wire::to_status(e), now_ns);
    return;
  }
  if (lane < 0) {
    if (remote.daemon_epoch == cfg_.epoch) {
      host_.fail_channel(ch, Status::BadRequest, now_ns);
      return;
    }
    if (!same_data_path(remote)) {
      spdlog::warn("channel {} ({}): peer's data lanes run on {}, ours on {} (start both with the same --transport)",
                   ch.id, ch.address, (remote.capabilities & wire::kCapRdma) != 0 ? "rdma" : "tcp",
                   to_string(lanes_.kind()));
      host_.fail_channel(ch, Status::NotSupported, now_ns);
      return;
    }
    if (const char* why = auth_.check_ack(ch, remote)) {
      auth_failed(ch, why, now_ns);
      return;
    }
    ch.peer_epoch = remote.daemon_epoch;
    ch.negotiated = n;
    ch.lane_count = n.qp_count < kMaxLanes ? n.qp_count : kMaxLanes;
    ch.peer_rails = remote.rail_ipv4;
    ch.peer_rail_count = remote.rail_count;
    host_.open_lanes(ch, now_ns);
    return;
  }
  // A lane's answer must come from the same daemon instance.
  if (remote.daemon_epoch != ch.peer_epoch) {
    host_.fail_channel(ch, Status::PeerReset, now_ns);
    return;
  }
  ch.lanes[static_cast<std::uint32_t>(lane)].join();
  host_.note_peer_rail(ch, static_cast<std::uint32_t>(lane));
  if (ch.all_lanes_joined()) host_.become_up(ch, now_ns);
}

void ChannelHandshake::lane_credits_from_ack(Channel& ch, std::int32_t lane, const wire::Header& h,
                                             const std::byte* payload, std::uint64_t now_ns) {
  if (lane < 0 || h.status != Status::Ok || !ch.initiated) return;
  wire::Handshake remote;
  // A bad payload is refused by on_hello_ack itself; nothing to learn here.
  if (wire::decode_handshake({payload, h.payload_len}, remote) != wire::WireError::None) return;
  flow_.credits_from_ack(ch, static_cast<std::uint32_t>(lane), remote, now_ns);
}

void ChannelHandshake::rejoin_accept(Channel& ch, std::uint32_t lane, transport::ConnId conn, const wire::Header& h,
                                     const wire::Handshake& remote, bool on_lanes, std::uint64_t now_ns) {
  Lane& l = ch.lanes[lane];
  // The initiator gave up the old connection; we may not have noticed yet.
  if (!l.broken()) flow_.break_lane(ch, lane, "the peer replaced the lane's connection", now_ns);
  if (!ch.usable() || !l.broken()) {
    refuse(conn, h.token, Status::PeerReset, on_lanes);
    return;
  }
  l.rejoin(conn);
  host_.note_peer_rail(ch, lane);
  table_.conns().set(conn, on_lanes, ConnTable::Ref{ch.id, static_cast<std::int32_t>(lane)});
  credits_.accepted(l, remote, handshake_sent(ch));
  send_hello(ch, conn, h.token, true, Status::Ok, on_lanes);  // rejoin ack: our own ack first, then data
  flow_.replay(ch, lane, h.ack, now_ns);
}

void ChannelHandshake::rejoin_ack(Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
                                  std::uint64_t now_ns) {
  Lane& l = ch.lanes[lane];
  if (!l.broken() || l.conn() == transport::kInvalidConn) {
    host_.fail_channel(ch, Status::ProtocolError, now_ns);
    return;
  }
  if (h.status != Status::Ok) {
    spdlog::warn("channel {} ({}) lane {}: the peer refused the rebuilt lane ({})", ch.id, ch.address, lane,
                 to_string(h.status));
    host_.fail_channel(ch, Status::PeerReset, now_ns);
    return;
  }
  wire::Handshake remote;
  if (wire::decode_handshake({payload, h.payload_len}, remote) != wire::WireError::None ||
      remote.daemon_epoch != ch.peer_epoch) {
    host_.fail_channel(ch, Status::PeerReset, now_ns);  // not the daemon instance we had: a restart
    return;
  }
  credits_.answered(l, remote);
  l.rejoin(l.conn());
  host_.note_peer_rail(ch, lane);
  flow_.replay(ch, lane, h.ack, now_ns);
}

void ChannelHandshake::resolve_duplicate(Channel& ch, std::uint64_t now_ns) {
  auto initiator_epoch = [this](const Channel& c) { return c.initiated ? cfg_.epoch : c.peer_epoch; };
  for (auto& [id, other] : table_) {
    Channel& o = *other;
    if (o.id == ch.id || o.peer_epoch != ch.peer_epoch || o.state != ChannelState::Up) continue;
    const std::uint64_t a = initiator_epoch(ch), b = initiator_epoch(o);
    const bool ch_wins = a != b ? a < b : ch.id < o.id;
    Channel& winner = ch_wins ? ch : o;
    Channel& loser = ch_wins ? o : ch;
    spdlog::info("channels {} and {} join the same peer (epoch {:#018x}): keeping {} (initiated by epoch {:#018x})",
                 ch.id, o.id, ch.peer_epoch, winner.id, initiator_epoch(winner));
    loser.superseded_by = winner.id;
    if (!loser.address.empty()) {
      table_.addresses().route(loser.address, winner.id);
      if (winner.address.empty()) {
        winner.address = loser.address;
        winner.host = loser.host;
        winner.port = loser.port;
      }
    }
    host_.set_state(loser, ChannelState::Draining, now_ns);
    if (&loser == &ch) return;
  }
}

void ChannelHandshake::auth_failed(Channel& ch, std::string_view why, std::uint64_t now_ns) {
  spdlog::warn("channel {} ({}): authentication failed: {}; channel refused", ch.id,
               ch.address.empty() ? "accepted" : ch.address, why);
  bump(counters_.peer_auth_failures);
  wire::Header bye;
  bye.type = wire::MsgType::Goodbye;
  bye.status = Status::PermissionDenied;
  (void)post_on_bootstrap(bootstrap_, ch, bye);  // best effort: the peer's log says why too (the failing closes)
  host_.fail_channel(ch, Status::PermissionDenied, now_ns);
}

void ChannelHandshake::send_challenge(transport::ConnId conn, bool on_lanes) {
  if (!auth_.on()) return;
  // The nonce lives in challenges_ until the connection's Closed: the WR points at it.
  wire::AuthNonce& nonce = challenges_.add(conn, on_lanes);
  if (!fresh_nonce(nonce)) {
    spdlog::error("peer connection: getrandom failed ({}): cannot authenticate it; closing it", std::strerror(errno));
    table_.conns().erase(conn, on_lanes);
    (void)via(on_lanes).close(conn);
    return;
  }
  transport::SendWr wr;
  wr.conn = conn;
  wr.header.type = wire::MsgType::Challenge;
  wr.payload = reinterpret_cast<const std::byte*>(nonce.data());
  wr.payload_len = static_cast<std::uint32_t>(nonce.size());
  wr.signaled = false;
  (void)via(on_lanes).post_send(std::span<const transport::SendWr>(&wr, 1));  // refused: the Hello never comes
}

void ChannelHandshake::on_challenge(Channel& ch, std::int32_t lane, const transport::Completion& c,
                                    std::uint64_t now_ns) {
  // The bootstrap's HelloAck proof already covers our fresh nonce: a
  // Challenge there is ignored (as it is by a daemon without a secret).
  if (lane < 0 || !auth_.on() || !ch.initiated) return;
  const auto i = static_cast<std::uint32_t>(lane);
  LaneAuth& la = ch.lane_auth[i];
  if (c.conn != ch.lanes[i].conn() || la.challenged) {
    spdlog::warn("channel {} ({}) lane {}: a second Challenge on one connection; failing the channel", ch.id,
                 ch.address, lane);
    host_.fail_channel(ch, Status::ProtocolError, now_ns);
    return;
  }
  std::memcpy(la.challenge.data(), c.payload, la.challenge.size());  // the header check fixed its length
  la.challenged = true;
  if (la.dialed) send_hello(ch, c.conn, i + 1, false, Status::Ok, true);
}

void ChannelHandshake::lane_proof_refused(const Channel& ch, transport::ConnId conn, const wire::Header& h,
                                          bool on_lanes) {
  spdlog::warn(
      "channel {} ({}): authentication failed: a {} Hello for lane {} has no valid proof for its connection "
      "(a replayed or forged handshake, or different secrets); that connection refused, the channel kept",
      ch.id, ch.address.empty() ? "accepted" : ch.address, (h.flags & wire::kFlagRetransmit) != 0 ? "rejoin" : "join",
      h.token - 1);
  bump(counters_.peer_auth_failures);
  refuse(conn, h.token, Status::PermissionDenied, on_lanes);
}

}  // namespace ferry::daemon::peer
