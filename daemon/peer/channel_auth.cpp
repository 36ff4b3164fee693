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

#include "daemon/peer/channel_auth.h"
#include "daemon/peer/hello_proof.h"
#include "transport/wire/auth_proof.h"

namespace ferry::daemon::peer {
namespace {

std::span<const std::uint8_t> bytes_of(const std::string& s) noexcept {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

const char* name_of(const Channel& ch) noexcept { return ch.address.empty() ? "accepted" : ch.address.c_str(); }

// Our Hello/HelloAck payload for this channel: the shared one plus its nonce (and proof).
void encode_channel_hello(Channel& ch, const wire::Handshake& local, bool with_proof) noexcept {
  wire::Handshake hs = local;
  hs.has_nonce = true;
  hs.auth_nonce = ch.local_nonce;
  hs.has_proof = with_proof;
  if (with_proof) hs.auth_proof = ch.local_proof;
  ch.hello_len = static_cast<std::uint32_t>(wire::encode_handshake(hs, ch.hello));
}

}  // namespace

bool ChannelAuth::start(Channel& ch, const wire::Handshake& local) const noexcept {
  if (!on()) return true;
  if (!fresh_nonce(ch.local_nonce)) {
    spdlog::error("channel {} ({}): getrandom failed ({}): cannot authenticate", ch.id, name_of(ch),
                  std::strerror(errno));
    return false;
  }
  encode_channel_hello(ch, local, false);
  return true;
}

bool ChannelAuth::check_hello(const wire::Handshake& remote, bool loud) const noexcept {
  const bool peer_auth = (remote.capabilities & wire::kCapAuth) != 0 && remote.has_nonce;
  const spdlog::level::level_enum level = loud ? spdlog::level::warn : spdlog::level::debug;
  if (on() && !peer_auth) {
    spdlog::log(level,
                "peer Hello (epoch {:#018x}) refused: authentication failed: the peer does not authenticate "
                "(no auth-secret-file there, or a build without authentication)",
                remote.daemon_epoch);
  } else if (!on() && (peer_auth || (remote.capabilities & wire::kCapAuth) != 0)) {
    spdlog::log(level,
                "peer Hello (epoch {:#018x}) refused: authentication failed: the peer requires authentication "
                "and this daemon has no auth-secret-file",
                remote.daemon_epoch);
  } else {
    return true;
  }
  return false;
}

bool ChannelAuth::accept(Channel& ch, const wire::Handshake& remote, const wire::Handshake& local) const noexcept {
  if (!on()) return true;
  ch.peer_nonce = remote.auth_nonce;
  if (!fresh_nonce(ch.local_nonce)) {
    spdlog::error("channel {} ({}): getrandom failed ({}): cannot authenticate", ch.id, name_of(ch),
                  std::strerror(errno));
    return false;
  }
  const wire::AuthTranscript t{ch.peer_nonce, ch.local_nonce, remote.daemon_epoch, epoch_};
  ch.local_proof = wire::make_auth_proof(bytes_of(secret_), wire::AuthRole::Acceptor, t);
  encode_channel_hello(ch, local, true);
  return true;
}

const char* ChannelAuth::check_ack(Channel& ch, const wire::Handshake& remote) const noexcept {
  const bool peer_auth = (remote.capabilities & wire::kCapAuth) != 0;
  if (!on()) {
    if (!peer_auth) return nullptr;
    // A peer with a secret refuses us before answering; one that answers
    // anyway does not follow the policy, so the refusal is ours.
    return "the peer requires authentication and this daemon has no auth-secret-file";
  }
  if (!peer_auth || !remote.has_proof) {
    return "the peer did not authenticate (no auth-secret-file there, or a build without authentication)";
  }
  ch.peer_nonce = remote.auth_nonce;
  const wire::AuthTranscript t{ch.local_nonce, ch.peer_nonce, epoch_, remote.daemon_epoch};
  const auto secret = bytes_of(secret_);
  if (!wire::verify_auth_proof(secret, wire::AuthRole::Acceptor, t, remote.auth_proof)) {
    return "the peer's proof does not match our secret (the auth secrets differ)";
  }
  // Each lane Hello then carries a proof of its own, bound to its
  // connection (encode_lane): the acceptor joins no lane without it.
  spdlog::info("channel {} ({}): peer authenticated", ch.id, name_of(ch));
  return nullptr;
}

bool ChannelAuth::check_lane_hello(const Channel& ch, const wire::AuthNonce* challenge, const wire::Header& h,
                                   const wire::Handshake& remote) const noexcept {
  if (!on()) return true;
  if (challenge == nullptr || !remote.has_proof || !remote.has_conn_nonce || remote.auth_nonce != ch.peer_nonce) {
    return false;
  }
  LaneTranscript t;
  t.initiator_nonce = ch.peer_nonce;
  t.acceptor_nonce = ch.local_nonce;
  t.challenge = *challenge;
  t.dialer_nonce = remote.conn_nonce;
  t.initiator_epoch = ch.peer_epoch;
  t.acceptor_epoch = epoch_;
  t.lane = static_cast<std::uint32_t>(h.token - 1);
  t.rejoin = (h.flags & wire::kFlagRetransmit) != 0;
  t.ack = h.ack;
  return verify_lane_proof(bytes_of(secret_), HelloDir::Hello, t, remote.auth_proof);
}

bool ChannelAuth::check_lane_ack(const Channel& ch, std::uint32_t lane, const wire::Header& h,
                                 const std::byte* payload) const noexcept {
  // A refusal carries no proof; what it does is the same as a reset's.
  if (!on() || h.status != Status::Ok || lane >= kMaxLanes) return true;
  const LaneAuth& la = ch.lane_auth[lane];
  wire::Handshake remote;
  if (wire::decode_handshake({payload, h.payload_len}, remote) != wire::WireError::None || !remote.has_proof ||
      !la.challenged) {
    return false;
  }
  LaneTranscript t;
  t.initiator_nonce = ch.local_nonce;
  t.acceptor_nonce = ch.peer_nonce;
  t.challenge = la.challenge;
  t.dialer_nonce = la.conn_nonce;
  t.initiator_epoch = epoch_;
  t.acceptor_epoch = ch.peer_epoch;
  t.lane = lane;
  t.rejoin = (h.flags & wire::kFlagRetransmit) != 0;
  t.ack = h.ack;
  t.status = h.status;
  return verify_lane_proof(bytes_of(secret_), HelloDir::HelloAck, t, remote.auth_proof);
}

bool ChannelAuth::encode_lane(Channel& ch, const wire::AuthNonce* challenge, const wire::Header& h,
                              const wire::Handshake& local) const noexcept {
  if (!on() || ch.id == 0 || h.token == 0 || h.token > kMaxLanes || h.status != Status::Ok) return false;
  LaneAuth& la = ch.lane_auth[h.token - 1];
  const bool hello = h.type == wire::MsgType::Hello;
  LaneTranscript t;
  if (hello) {
    if (!la.challenged || !fresh_nonce(la.conn_nonce)) return false;  // then refused by the peer, and logged there
    t.initiator_nonce = ch.local_nonce;
    t.acceptor_nonce = ch.peer_nonce;
    t.initiator_epoch = epoch_;
    t.acceptor_epoch = ch.peer_epoch;
  } else {
    if (challenge == nullptr) return false;
    la.challenge = *challenge;  // la.conn_nonce: the dialer's, from its Hello (on_lane_hello)
    t.initiator_nonce = ch.peer_nonce;
    t.acceptor_nonce = ch.local_nonce;
    t.initiator_epoch = ch.peer_epoch;
    t.acceptor_epoch = epoch_;
  }
  t.challenge = la.challenge;
  t.dialer_nonce = la.conn_nonce;
  t.lane = static_cast<std::uint32_t>(h.token - 1);
  t.rejoin = (h.flags & wire::kFlagRetransmit) != 0;
  t.ack = h.ack;
  t.status = h.status;
  wire::Handshake hs = local;
  hs.has_nonce = true;
  hs.auth_nonce = ch.local_nonce;
  hs.has_proof = true;
  hs.auth_proof = make_lane_proof(bytes_of(secret_), hello ? HelloDir::Hello : HelloDir::HelloAck, t);
  hs.has_conn_nonce = hello;
  hs.conn_nonce = la.conn_nonce;
  la.hello_len = static_cast<std::uint32_t>(wire::encode_handshake(hs, la.hello));
  return la.hello_len != 0;
}

}  // namespace ferry::daemon::peer
