// The channel handshake. Initiator: bootstrap Hello(token 0) -> HelloAck,
// then one connection per data lane, each Hello(token lane+1) -> HelloAck;
// Up when every lane has joined. Acceptor: a Hello with token 0 starts a
// channel, a Hello with token N joins lane N-1 of the accepted channel with
// the same peer epoch. Version, epoch and lane checks refuse with a status
// in HelloAck, then close.
//
// Duplicates: when both daemons connect to each other at once, two channels
// to the same peer epoch come Up. Both sides keep the one initiated by the
// daemon with the lower epoch (ties: the older channel), so they agree
// without another message. The loser goes Draining: it serves endpoints
// already on it, new work routes to the winner, and its initiator closes it
// once it has no endpoints.
#include <spdlog/spdlog.h>

#include "daemon/peer/channel_manager.h"

namespace ferry::daemon::peer {

wire::Handshake ChannelManager::local_handshake() const noexcept {
  wire::Handshake hs;
  hs.protocol_version = wire::kProtocolVersion;
  hs.qp_count = static_cast<std::uint16_t>(cfg_.lanes);
  hs.daemon_epoch = cfg_.epoch;
  hs.capabilities = lanes_.kind() == transport::TransportKind::Rdma ? wire::kCapRdma : wire::kCapTcp;
  hs.initial_credits = recv_depth_;  // receives each lane posts: the peer's credits (channel_credits.cpp)
  hs.max_message_bytes = cfg_.max_message_bytes;
  if (auth_on()) hs.capabilities |= wire::kCapAuth;
  return hs;
}

bool ChannelManager::same_data_path(const wire::Handshake& remote) const noexcept {
  const std::uint64_t ours = local_handshake().capabilities & (wire::kCapTcp | wire::kCapRdma);
  return (remote.capabilities & ours) != 0;
}

void ChannelManager::send_hello(Channel& ch, transport::ConnId conn, std::uint64_t token, bool ack, Status status,
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
  // (channel_rebuild.cpp): it says so, with the last lane_seq we got there.
  if (token != 0 && token <= kMaxLanes && ch.usable()) {
    h.flags = wire::kFlagRetransmit;
    h.ack = ch.lanes[token - 1].rx_seq;
  }
  transport::SendWr wr;
  wr.conn = conn;
  wr.header = h;
  // A channel with its own payload (auth: nonce, proof) sends that one.
  const bool own = ch.hello_len != 0;
  wr.payload = own ? ch.hello.data() : hello_.data();
  wr.payload_len = own ? ch.hello_len : hello_len_;
  wr.signaled = false;
  const auto r = via(on_lanes).post_send(std::span<const transport::SendWr>(&wr, 1));
  if (r.accepted == 1) {
    ++ch.bootstrap_stats.tx_msgs;
    ch.bootstrap_stats.tx_bytes += wire::kHeaderBytes + wr.payload_len;
  }
}

void ChannelManager::refuse(transport::ConnId conn, std::uint64_t token, Status status, bool on_lanes) {
  Channel scratch;  // stats of a refused connection are not kept
  send_hello(scratch, conn, token, true, status, on_lanes);
  conns_.erase(key(conn, on_lanes));
  via(on_lanes).close(conn);
}

void ChannelManager::on_hello(transport::ConnId conn, const wire::Header& h, const std::byte* payload, bool on_lanes,
                              std::uint64_t now_ns) {
  wire::Handshake remote;
  const wire::WireError e = wire::decode_handshake({payload, h.payload_len}, remote);
  if (e != wire::WireError::None) {
    spdlog::warn("peer Hello rejected: {}", to_string(e));
    refuse(conn, h.token, wire::to_status(e), on_lanes);
    return;
  }
  wire::Negotiated n;
  if (wire::negotiate(local_handshake(), remote, n) != wire::WireError::None) {
    spdlog::warn("peer Hello rejected: protocol version {} (we speak {})", remote.protocol_version,
                 wire::kProtocolVersion);
    refuse(conn, h.token, Status::VersionMismatch, on_lanes);
    return;
  }
  if (remote.daemon_epoch == cfg_.epoch) {
    spdlog::warn("peer Hello rejected: it carries our own epoch (connected to ourselves)");
    refuse(conn, h.token, Status::BadRequest, on_lanes);
    return;
  }
  if (split_ && (h.token == 0) == on_lanes) {
    // A bootstrap Hello must come on the bootstrap transport, a lane's on the lanes'.
    spdlog::warn("peer Hello for {} arrived on the {} transport; refused", h.token == 0 ? "a bootstrap" : "a lane",
                 on_lanes ? "lane" : "bootstrap");
    refuse(conn, h.token, Status::ProtocolError, on_lanes);
    return;
  }
  if (h.token == 0 && !same_data_path(remote)) {
    spdlog::warn("peer Hello rejected: its data lanes run on {}, ours on {} (start both with the same --transport)",
                 (remote.capabilities & wire::kCapRdma) != 0 ? "rdma" : "tcp", to_string(lanes_.kind()));
    refuse(conn, h.token, Status::NotSupported, on_lanes);
    return;
  }
  if (h.token == 0 && !auth_check_hello(conn, remote, on_lanes)) return;
  if (h.token == 0) {
    Channel& ch = create(false, now_ns);
    ch.bootstrap = conn;
    ch.peer_epoch = remote.daemon_epoch;
    ch.negotiated = n;
    ch.lane_count = n.qp_count < kMaxLanes ? n.qp_count : kMaxLanes;
    conns_[key(conn, false)] = ConnRef{ch.id, -1};
    if (h.ack != 0 && h.ack <= 0xFFFF) {
      const std::string host = transport_.peer_address(conn);
      if (!host.empty()) {
        ch.host = host;
        ch.port = static_cast<std::uint16_t>(h.ack);
        ch.address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(ch.port);
        by_address_.try_emplace(ch.address, ch.id);  // an Open of ours already under way keeps its channel
      }
    }
    spdlog::info("channel {} from peer epoch {:#018x}: {}", ch.id, ch.peer_epoch, to_string(ch.state));
    set_state(ch, ChannelState::Handshaking, now_ns);
    if (!auth_accept(ch, remote, now_ns)) return;
    send_hello(ch, conn, 0, true, Status::Ok, false);
    return;
  }
  const std::uint64_t lane = h.token - 1;
  if ((h.flags & wire::kFlagRetransmit) != 0) {
    // A rejoin: a new connection for a lane of a channel that is Up.
    for (auto& [id, ch] : channels_) {
      if (ch->initiated || ch->peer_epoch != remote.daemon_epoch || !ch->usable() || lane >= ch->lane_count) continue;
      if (auth_on() && (!remote.has_nonce || remote.auth_nonce != ch->peer_nonce)) continue;
      if (!auth_check_lane(*ch, remote)) {
        refuse(conn, h.token, Status::PermissionDenied, on_lanes);
        auth_failed(*ch, "a rebuilt lane's proof does not match our secret", now_ns);
        return;
      }
      rejoin_accept(*ch, static_cast<std::uint32_t>(lane), conn, h, remote, on_lanes, now_ns);
      return;
    }
    spdlog::warn("peer rejoin Hello for lane {} matches no channel that is up; refused", lane);
    refuse(conn, h.token, Status::PeerReset, on_lanes);
    return;
  }
  for (auto& [id, ch] : channels_) {
    if (ch->initiated || ch->peer_epoch != remote.daemon_epoch || ch->state != ChannelState::Handshaking) continue;
    if (lane >= ch->lane_count || ch->lanes[lane].joined) continue;
    // With auth, the lane names its channel by the initiator's nonce and
    // joins only with the initiator's proof: nothing flows before it.
    if (auth_on() && (!remote.has_nonce || remote.auth_nonce != ch->peer_nonce)) continue;
    if (!auth_check_lane(*ch, remote)) {
      refuse(conn, h.token, Status::PermissionDenied, on_lanes);
      auth_failed(*ch, "a data lane's proof does not match our secret (the auth secrets differ)", now_ns);
      return;
    }
    Lane& l = ch->lanes[lane];
    l.conn = conn;
    l.joined = true;
    conns_[key(conn, on_lanes)] = ConnRef{ch->id, static_cast<std::int32_t>(lane)};
    lane_credits_from(*ch, static_cast<std::uint32_t>(lane), remote.initial_credits, true);
    send_hello(*ch, conn, h.token, true, Status::Ok, on_lanes);
    if (ch->all_lanes_joined()) become_up(*ch, now_ns);
    return;
  }
  spdlog::warn("peer Hello for lane {} matches no channel being set up; refused", lane);
  refuse(conn, h.token, Status::ProtocolError, on_lanes);
}

void ChannelManager::on_hello_ack(Channel& ch, std::int32_t lane, const wire::Header& h, const std::byte* payload,
                                  std::uint64_t now_ns) {
  if (lane >= 0 && ch.initiated && ch.usable() && (h.flags & wire::kFlagRetransmit) != 0) {
    rejoin_ack(ch, static_cast<std::uint32_t>(lane), h, payload, now_ns);
    return;
  }
  lane_credits_from_ack(ch, lane, h, payload);
  if (ch.initiated && lane >= 0 && ch.usable() && ch.lanes[static_cast<std::uint32_t>(lane)].joined) {
    // A lane's ack overtaken by data on another lane (see on_recv): the
    // channel already went Up on the strength of that data.
    if (h.status != Status::Ok) fail(ch, h.status, now_ns);
    return;
  }
  if (!ch.initiated || ch.state != ChannelState::Handshaking) {
    fail(ch, Status::ProtocolError, now_ns);
    return;
  }
  if (h.status == Status::PermissionDenied) {
    spdlog::warn("channel {} ({}): authentication failed: the peer refused us (auth-secret-file on one side only?)",
                 ch.id, ch.address);
    bump(counters_.peer_auth_failures);
    fail(ch, h.status, now_ns);
    return;
  }
  if (h.status != Status::Ok) {
    spdlog::warn("channel {} ({}): peer refused the handshake ({})", ch.id, ch.address, to_string(h.status));
    fail(ch, h.status, now_ns);
    return;
  }
  wire::Handshake remote;
  const wire::WireError e = wire::decode_handshake({payload, h.payload_len}, remote);
  wire::Negotiated n;
  if (e != wire::WireError::None || wire::negotiate(local_handshake(), remote, n) != wire::WireError::None) {
    fail(ch, e == wire::WireError::None ? Status::VersionMismatch : wire::to_status(e), now_ns);
    return;
  }
  if (lane < 0) {
    if (remote.daemon_epoch == cfg_.epoch) {
      fail(ch, Status::BadRequest, now_ns);
      return;
    }
    if (!same_data_path(remote)) {
      spdlog::warn("channel {} ({}): peer's data lanes run on {}, ours on {} (start both with the same --transport)",
                   ch.id, ch.address, (remote.capabilities & wire::kCapRdma) != 0 ? "rdma" : "tcp",
                   to_string(lanes_.kind()));
      fail(ch, Status::NotSupported, now_ns);
      return;
    }
    if (!auth_check_ack(ch, remote, now_ns)) return;
    ch.peer_epoch = remote.daemon_epoch;
    ch.negotiated = n;
    ch.lane_count = n.qp_count < kMaxLanes ? n.qp_count : kMaxLanes;
    open_lanes(ch, now_ns);
    return;
  }
  // A lane's answer must come from the same daemon instance.
  if (remote.daemon_epoch != ch.peer_epoch) {
    fail(ch, Status::PeerReset, now_ns);
    return;
  }
  ch.lanes[static_cast<std::uint32_t>(lane)].joined = true;
  if (ch.all_lanes_joined()) become_up(ch, now_ns);
}

void ChannelManager::open_lanes(Channel& ch, std::uint64_t now_ns) {
  for (std::uint32_t i = 0; i < ch.lane_count; ++i) {
    if (!start_connect(ch, static_cast<std::int32_t>(i), now_ns)) return;
  }
}

void ChannelManager::become_up(Channel& ch, std::uint64_t now_ns) {
  start_credits(ch);
  set_state(ch, ChannelState::Up, now_ns);
  ch.was_up = true;
  if (!ch.address.empty()) redial_.erase(ch.address);
  bump(counters_.peer_connects);
  ch.last_heard_ns = now_ns;
  ch.next_ping_ns = now_ns;  // first heartbeat right away gives an RTT early
  resolve_duplicate(ch);
  events_.on_channel_up(ch);
  // A losing duplicate nobody uses closes (its initiator decides).
  for (auto& [id, other] : channels_) {
    if (other->peer_epoch == ch.peer_epoch) close_if_unused(*other, now_ns);
  }
}

void ChannelManager::resolve_duplicate(Channel& ch) {
  auto initiator_epoch = [this](const Channel& c) { return c.initiated ? cfg_.epoch : c.peer_epoch; };
  for (auto& [id, other] : channels_) {
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
      by_address_[loser.address] = winner.id;
      if (winner.address.empty()) {
        winner.address = loser.address;
        winner.host = loser.host;
        winner.port = loser.port;
      }
    }
    set_state(loser, ChannelState::Draining, last_now_ns_);
    if (&loser == &ch) return;
  }
}

}  // namespace ferry::daemon::peer
