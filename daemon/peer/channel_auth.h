// Shared-secret authentication of a channel's handshake (channel_auth.cpp;
// the protocol is in transport/wire/auth_proof.h for the bootstrap and
// daemon/peer/hello_proof.h for each data lane's connection). Each step
// works on one Channel's nonces and proofs and says whether the handshake
// may go on; the ChannelManager sends the Challenges and refuses or fails
// the channel when it may not.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/peer/channel.h"
#include "transport/wire/handshake.h"

namespace ferry::daemon::peer {

class ChannelAuth {
 public:
  ChannelAuth(std::string secret, std::uint64_t epoch) : secret_(std::move(secret)), epoch_(epoch) {}
  bool on() const noexcept { return !secret_.empty(); }

  // Initiator: our nonce into the bootstrap Hello (`local`: our handshake).
  // False: no randomness (logged).
  [[nodiscard]] bool start(Channel& ch, const wire::Handshake& local) const noexcept;
  // Acceptor, a bootstrap Hello: whether both sides agree to authenticate
  // (or both not to). False: refuse it with PermissionDenied (logged).
  // loud: log the refusal (the caller rate-limits strangers' Hellos).
  [[nodiscard]] bool check_hello(const wire::Handshake& remote, bool loud = true) const noexcept;
  // Acceptor: our nonce and proof into the HelloAck. False: no randomness.
  [[nodiscard]] bool accept(Channel& ch, const wire::Handshake& remote, const wire::Handshake& local) const noexcept;
  // Initiator, the bootstrap HelloAck: checks the acceptor's proof (each
  // lane Hello then carries a proof of its own: encode_lane). nullptr when
  // it holds, else why not.
  [[nodiscard]] const char* check_ack(Channel& ch, const wire::Handshake& remote) const noexcept;

  // Lane handshakes bound to their connection (hello_proof.h).
  // Acceptor, a lane Hello (header `h`) on a connection we sent `challenge`
  // (nullptr: none was sent): the initiator's proof over it.
  [[nodiscard]] bool check_lane_hello(const Channel& ch, const wire::AuthNonce* challenge, const wire::Header& h,
                                      const wire::Handshake& remote) const noexcept;
  // Initiator, a lane HelloAck (`payload`): the acceptor's proof over this
  // connection's nonces. A refusal carries none and passes.
  [[nodiscard]] bool check_lane_ack(const Channel& ch, std::uint32_t lane, const wire::Header& h,
                                    const std::byte* payload) const noexcept;
  // Our lane Hello/HelloAck (header `h`, lane h.token - 1) with its proof,
  // into ch.lane_auth[lane].hello. Acceptor: `challenge` is the one sent on
  // this connection. False when auth is off or none is due (then the
  // channel's or the shared payload goes, and the peer refuses a Hello).
  bool encode_lane(Channel& ch, const wire::AuthNonce* challenge, const wire::Header& h,
                   const wire::Handshake& local) const noexcept;
  // Acceptor: whether a lane Hello names this channel (by the initiator's nonce).
  bool names(const Channel& ch, const wire::Handshake& remote) const noexcept {
    return !on() || (remote.has_nonce && remote.auth_nonce == ch.peer_nonce);
  }

 private:
  std::string secret_;  // empty: off
  std::uint64_t epoch_;
};

}  // namespace ferry::daemon::peer
