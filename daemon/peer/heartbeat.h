// Liveness of a channel, over its bootstrap connection: at most every
// heartbeat_ms a ping (Heartbeat, token = send time, ack 0); the pong echoes
// the token with ack 1, which gives the RTT. Anything heard from the peer
// counts as life, so a ping goes only after an interval of silence (or
// every kRttEvery intervals, for the RTT): a channel carrying traffic sends
// almost none, an idle pair about one exchange per interval. After
// peer_timeout_ms of silence the channel is dead, so a peer that hangs
// without a TCP reset is still found. Free functions over one Channel:
// the ChannelManager decides what a dead peer means.
#pragma once

#include <cstdint>

#include "daemon/peer/channel.h"
#include "transport/transport.h"

namespace ferry::daemon::peer {

inline constexpr std::uint64_t kRttEvery = 8;  // intervals between pings on a busy channel

struct HeartbeatStep {
  bool dead = false;    // silent for peer_timeout_ms
  bool missed = false;  // one more interval went by without a word
  bool ping = false;    // a ping is due now (next_ping_ns moved on)
};
HeartbeatStep heartbeat_step(Channel& ch, std::uint64_t now_ns, std::uint32_t heartbeat_ms,
                             std::uint32_t peer_timeout_ms) noexcept;

// A header-only message on the channel's bootstrap connection (a ping, a
// pong, a Goodbye), counted in its bootstrap stats. False when there is no
// connection or the transport did not take it.
bool post_on_bootstrap(transport::Transport& t, Channel& ch, const wire::Header& h) noexcept;

wire::Header ping_header(std::uint64_t now_ns) noexcept;
// A Heartbeat from the peer: a pong updates the RTT (false); a ping wants
// `pong` sent back (true).
bool take_heartbeat(Channel& ch, const wire::Header& h, std::uint64_t now_ns, wire::Header& pong) noexcept;

}  // namespace ferry::daemon::peer
