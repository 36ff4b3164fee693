// Shared-secret authentication of a channel's handshake (channel_auth.cpp;
// the protocol is in transport/wire/auth_proof.h). Each step works on one
// Channel's nonces and proof and says whether the handshake may go on; the
// ChannelManager refuses or fails the channel when it may not.
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
  [[nodiscard]] bool check_hello(const wire::Handshake& remote) const noexcept;
  // Acceptor: our nonce and proof into the HelloAck. False: no randomness.
  [[nodiscard]] bool accept(Channel& ch, const wire::Handshake& remote, const wire::Handshake& local) const noexcept;
  // Initiator, the bootstrap HelloAck: checks the acceptor's proof and puts
  // ours into the lane Hellos. nullptr when it holds, else why not.
  [[nodiscard]] const char* check_ack(Channel& ch, const wire::Handshake& remote,
                                      const wire::Handshake& local) const noexcept;
  // Acceptor, a lane Hello: the initiator's proof.
  [[nodiscard]] bool check_lane(const Channel& ch, const wire::Handshake& remote) const noexcept;
  // Acceptor: whether a lane Hello names this channel (by the initiator's nonce).
  bool names(const Channel& ch, const wire::Handshake& remote) const noexcept {
    return !on() || (remote.has_nonce && remote.auth_nonce == ch.peer_nonce);
  }

 private:
  std::string secret_;  // empty: off
  std::uint64_t epoch_;
};

}  // namespace ferry::daemon::peer
