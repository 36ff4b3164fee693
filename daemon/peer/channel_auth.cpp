// Shared-secret authentication of a channel's handshake; the protocol and
// what it protects against are in transport/wire/auth_proof.h (the
// bootstrap) and daemon/peer/hello_proof.h (each data lane's connection).
//
// Policy: both daemons must run with a secret or both without. A daemon
// with one refuses a peer that does not authenticate, and a daemon without
// one refuses a peer that asks to, both with PermissionDenied: a forgotten
// auth-secret-file on one host then fails loudly at the first Open rather
// than leaving that pair silently unauthenticated. Every refusal logs
// "authentication failed" on the side that detects it; the other side hears
// PermissionDenied (HelloAck status, or Goodbye status once the acceptor has
// answered) and logs the same words. The secret itself is never logged.
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "daemon/peer/channel_manager.h"
#include "daemon/peer/hello_proof.h"
#include "transport/wire/auth_proof.h"

namespace ferry::daemon::peer {
namespace {

std::span<const std::uint8_t> bytes_of(const std::string& s) noexcept {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

const char* name_of(const Channel& ch) noexcept { return ch.address.empty() ? "accepted" : ch.address.c_str(); }

}  // namespace

void ChannelManager::encode_channel_hello(Channel& ch, bool with_proof) noexcept {
  wire::Handshake hs = local_handshake();
  hs.has_nonce = true;
  hs.auth_nonce = ch.local_nonce;
  hs.has_proof = with_proof;
  if (with_proof) hs.auth_proof = ch.local_proof;
  ch.hello_len = static_cast<std::uint32_t>(wire::encode_handshake(hs, ch.hello));
}

bool ChannelManager::auth_start(Channel& ch, std::uint64_t now_ns) {
  if (!auth_on()) return true;
  if (!fresh_nonce(ch.local_nonce)) {
    spdlog::error("channel {} ({}): getrandom failed ({}): cannot authenticate", ch.id, name_of(ch),
                  std::strerror(errno));
    fail(ch, Status::PermissionDenied, now_ns);
    return false;
  }
  encode_channel_hello(ch, false);
  return true;
}

bool ChannelManager::auth_check_hello(transport::ConnId conn, const wire::Handshake& remote, bool on_lanes) {
  const bool peer_auth = (remote.capabilities & wire::kCapAuth) != 0 && remote.has_nonce;
  if (auth_on() && !peer_auth) {
    spdlog::warn(
        "peer Hello (epoch {:#018x}) refused: authentication failed: the peer does not authenticate "
        "(no auth-secret-file there, or a build without authentication)",
        remote.daemon_epoch);
  } else if (!auth_on() && (peer_auth || (remote.capabilities & wire::kCapAuth) != 0)) {
    spdlog::warn(
        "peer Hello (epoch {:#018x}) refused: authentication failed: the peer requires authentication "
        "and this daemon has no auth-secret-file",
        remote.daemon_epoch);
  } else {
    return true;
  }
  bump(counters_.peer_auth_failures);
  refuse(conn, 0, Status::PermissionDenied, on_lanes);
  return false;
}

bool ChannelManager::auth_accept(Channel& ch, const wire::Handshake& remote, std::uint64_t now_ns) {
  if (!auth_on()) return true;
  ch.peer_nonce = remote.auth_nonce;
  if (!fresh_nonce(ch.local_nonce)) {
    spdlog::error("channel {} ({}): getrandom failed ({}): cannot authenticate", ch.id, name_of(ch),
                  std::strerror(errno));
    fail(ch, Status::PermissionDenied, now_ns);
    return false;
  }
  const wire::AuthTranscript t{ch.peer_nonce, ch.local_nonce, remote.daemon_epoch, cfg_.epoch};
  ch.local_proof = wire::make_auth_proof(bytes_of(cfg_.auth_secret), wire::AuthRole::Acceptor, t);
  encode_channel_hello(ch, true);
  return true;
}

bool ChannelManager::auth_check_ack(Channel& ch, const wire::Handshake& remote, std::uint64_t now_ns) {
  const bool peer_auth = (remote.capabilities & wire::kCapAuth) != 0;
  if (!auth_on()) {
    if (!peer_auth) return true;
    // A peer with a secret refuses us before answering; one that answers
    // anyway does not follow the policy, so the refusal is ours.
    auth_failed(ch, "the peer requires authentication and this daemon has no auth-secret-file", now_ns);
    return false;
  }
  if (!peer_auth || !remote.has_proof) {
    auth_failed(ch, "the peer did not authenticate (no auth-secret-file there, or a build without authentication)",
                now_ns);
    return false;
  }
  ch.peer_nonce = remote.auth_nonce;
  const wire::AuthTranscript t{ch.local_nonce, ch.peer_nonce, cfg_.epoch, remote.daemon_epoch};
  const auto secret = bytes_of(cfg_.auth_secret);
  if (!wire::verify_auth_proof(secret, wire::AuthRole::Acceptor, t, remote.auth_proof)) {
    auth_failed(ch, "the peer's proof does not match our secret (the auth secrets differ)", now_ns);
    return false;
  }
  // Each lane Hello then carries a proof of its own, bound to its
  // connection (encode_lane_hello): the acceptor joins no lane without it.
  spdlog::info("channel {} ({}): peer authenticated", ch.id, name_of(ch));
  return true;
}

void ChannelManager::send_challenge(transport::ConnId conn, bool on_lanes) {
  if (!auth_on()) return;
  // The nonce lives here until the connection's Closed: the WR points at it.
  wire::AuthNonce& nonce = challenges_[key(conn, on_lanes)];
  if (!fresh_nonce(nonce)) {
    spdlog::error("peer connection: getrandom failed ({}): cannot authenticate it; closing it", std::strerror(errno));
    conns_.erase(key(conn, on_lanes));
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

void ChannelManager::on_challenge(Channel& ch, std::int32_t lane, const transport::Completion& c,
                                  std::uint64_t now_ns) {
  // The bootstrap's HelloAck proof already covers our fresh nonce: a
  // Challenge there is ignored (as it is by a daemon without a secret).
  if (lane < 0 || !auth_on() || !ch.initiated) return;
  Lane& l = ch.lanes[static_cast<std::uint32_t>(lane)];
  if (c.conn != l.conn || l.challenged) {
    spdlog::warn("channel {} ({}) lane {}: a second Challenge on one connection; failing the channel", ch.id,
                 name_of(ch), lane);
    fail(ch, Status::ProtocolError, now_ns);
    return;
  }
  std::memcpy(l.challenge.data(), c.payload, l.challenge.size());  // the header check fixed its length
  l.challenged = true;
  if (l.dialed) send_hello(ch, c.conn, static_cast<std::uint64_t>(lane) + 1, false, Status::Ok, true);
}

bool ChannelManager::lane_hello_ok(const Channel& ch, transport::ConnId conn, bool on_lanes, const wire::Header& h,
                                   const wire::Handshake& remote) const noexcept {
  if (!auth_on()) return true;
  const auto it = challenges_.find(key(conn, on_lanes));
  if (it == challenges_.end() || !remote.has_proof || !remote.has_conn_nonce || remote.auth_nonce != ch.peer_nonce) {
    return false;
  }
  LaneTranscript t;
  t.initiator_nonce = ch.peer_nonce;
  t.acceptor_nonce = ch.local_nonce;
  t.challenge = it->second;
  t.dialer_nonce = remote.conn_nonce;
  t.initiator_epoch = ch.peer_epoch;
  t.acceptor_epoch = cfg_.epoch;
  t.lane = static_cast<std::uint32_t>(h.token - 1);
  t.rejoin = (h.flags & wire::kFlagRetransmit) != 0;
  t.ack = h.ack;
  return verify_lane_proof(bytes_of(cfg_.auth_secret), HelloDir::Hello, t, remote.auth_proof);
}

bool ChannelManager::lane_ack_ok(const Channel& ch, std::uint32_t lane, const wire::Header& h,
                                 const std::byte* payload) const noexcept {
  // A refusal carries no proof; what it does is the same as a reset's.
  if (!auth_on() || h.status != Status::Ok) return true;
  const Lane& l = ch.lanes[lane];
  wire::Handshake remote;
  if (wire::decode_handshake({payload, h.payload_len}, remote) != wire::WireError::None || !remote.has_proof ||
      !l.challenged) {
    return false;
  }
  LaneTranscript t;
  t.initiator_nonce = ch.local_nonce;
  t.acceptor_nonce = ch.peer_nonce;
  t.challenge = l.challenge;
  t.dialer_nonce = l.conn_nonce;
  t.initiator_epoch = cfg_.epoch;
  t.acceptor_epoch = ch.peer_epoch;
  t.lane = lane;
  t.rejoin = (h.flags & wire::kFlagRetransmit) != 0;
  t.ack = h.ack;
  t.status = h.status;
  return verify_lane_proof(bytes_of(cfg_.auth_secret), HelloDir::HelloAck, t, remote.auth_proof);
}

bool ChannelManager::encode_lane_hello(Channel& ch, transport::ConnId conn, const wire::Header& h, bool on_lanes) {
  if (!auth_on() || ch.id == 0 || h.token == 0 || h.token > kMaxLanes || h.status != Status::Ok) return false;
  Lane& l = ch.lanes[h.token - 1];
  const bool hello = h.type == wire::MsgType::Hello;
  LaneTranscript t;
  if (hello) {
    if (!l.challenged || !fresh_nonce(l.conn_nonce)) return false;  // then refused by the peer, and logged there
    t.initiator_nonce = ch.local_nonce;
    t.acceptor_nonce = ch.peer_nonce;
    t.initiator_epoch = cfg_.epoch;
    t.acceptor_epoch = ch.peer_epoch;
  } else {
    const auto it = challenges_.find(key(conn, on_lanes));
    if (it == challenges_.end()) return false;
    l.challenge = it->second;  // l.conn_nonce: the dialer's, from its Hello (on_hello)
    t.initiator_nonce = ch.peer_nonce;
    t.acceptor_nonce = ch.local_nonce;
    t.initiator_epoch = ch.peer_epoch;
    t.acceptor_epoch = cfg_.epoch;
  }
  t.challenge = l.challenge;
  t.dialer_nonce = l.conn_nonce;
  t.lane = static_cast<std::uint32_t>(h.token - 1);
  t.rejoin = (h.flags & wire::kFlagRetransmit) != 0;
  t.ack = h.ack;
  t.status = h.status;
  wire::Handshake hs = local_handshake();
  hs.has_nonce = true;
  hs.auth_nonce = ch.local_nonce;
  hs.has_proof = true;
  hs.auth_proof = make_lane_proof(bytes_of(cfg_.auth_secret), hello ? HelloDir::Hello : HelloDir::HelloAck, t);
  hs.has_conn_nonce = hello;
  hs.conn_nonce = l.conn_nonce;
  l.hello_len = static_cast<std::uint32_t>(wire::encode_handshake(hs, l.hello));
  return l.hello_len != 0;
}

void ChannelManager::lane_proof_refused(const Channel& ch, transport::ConnId conn, const wire::Header& h,
                                        bool on_lanes) {
  spdlog::warn(
      "channel {} ({}): authentication failed: a {} Hello for lane {} has no valid proof for its connection "
      "(a replayed or forged handshake, or different secrets); that connection refused, the channel kept",
      ch.id, name_of(ch), (h.flags & wire::kFlagRetransmit) != 0 ? "rejoin" : "join", h.token - 1);
  bump(counters_.peer_auth_failures);
  refuse(conn, h.token, Status::PermissionDenied, on_lanes);
}

void ChannelManager::auth_failed(Channel& ch, std::string_view why, std::uint64_t now_ns) {
  spdlog::warn("channel {} ({}): authentication failed: {}; channel refused", ch.id, name_of(ch), why);
  bump(counters_.peer_auth_failures);
  say_goodbye(ch, Status::PermissionDenied);  // the peer's log says why too (fail() then closes)
  fail(ch, Status::PermissionDenied, now_ns);
}

}  // namespace ferry::daemon::peer
