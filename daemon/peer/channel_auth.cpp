// Shared-secret authentication of a channel's handshake; the protocol and
// what it protects against are in transport/wire/auth_proof.h.
//
// Policy: both daemons must run with a secret or both without. A daemon
// with one refuses a peer that does not authenticate, and a daemon without
// one refuses a peer that asks to, both with PermissionDenied: a forgotten
// auth-secret-file on one host then fails loudly at the first Open rather
// than leaving that pair silently unauthenticated. Every refusal logs
// "authentication failed" on the side that detects it; the other side hears
// PermissionDenied (HelloAck status, or Goodbye status once the acceptor has
// answered) and logs the same words. The secret itself is never logged.
#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "daemon/peer/channel_manager.h"
#include "transport/wire/auth_proof.h"

namespace ferry::daemon::peer {
namespace {

bool random_nonce(wire::AuthNonce& out) noexcept {
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::getrandom(out.data() + got, out.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    got += static_cast<std::size_t>(n);
  }
  return true;
}

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
  if (!random_nonce(ch.local_nonce)) {
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
  if (!random_nonce(ch.local_nonce)) {
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
  // Our proof rides on every lane Hello: the acceptor joins no lane without it.
  ch.local_proof = wire::make_auth_proof(secret, wire::AuthRole::Initiator, t);
  encode_channel_hello(ch, true);
  spdlog::info("channel {} ({}): peer authenticated", ch.id, name_of(ch));
  return true;
}

bool ChannelManager::auth_check_lane(Channel& ch, const wire::Handshake& remote) const noexcept {
  if (!auth_on()) return true;
  if (!remote.has_proof || remote.auth_nonce != ch.peer_nonce) return false;
  const wire::AuthTranscript t{ch.peer_nonce, ch.local_nonce, ch.peer_epoch, cfg_.epoch};
  return wire::verify_auth_proof(bytes_of(cfg_.auth_secret), wire::AuthRole::Initiator, t, remote.auth_proof);
}

void ChannelManager::auth_failed(Channel& ch, std::string_view why, std::uint64_t now_ns) {
  spdlog::warn("channel {} ({}): authentication failed: {}; channel refused", ch.id, name_of(ch), why);
  bump(counters_.peer_auth_failures);
  say_goodbye(ch, Status::PermissionDenied);  // the peer's log says why too (fail() then closes)
  fail(ch, Status::PermissionDenied, now_ns);
}

}  // namespace ferry::daemon::peer
