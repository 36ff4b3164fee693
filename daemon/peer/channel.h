// A channel joins this daemon to one peer daemon: one bootstrap connection
// (Hello/HelloAck handshake, heartbeats, lane rebuilds, Goodbye) plus
// k data connections ("lanes") that carry Open/Send/Call/Response. Every
// endpoint between any processes of the two hosts is multiplexed over it.
// Engine thread only (the ChannelManager that owns it runs there).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/peer/lane.h"
#include "transport/transport.h"
#include "transport/wire/handshake.h"

namespace ferry::daemon::peer {

// Connecting: TCP connect of the bootstrap connection in progress.
// Handshaking: Hello sent (initiator) or received (acceptor); data lanes joining.
// Up: handshake done, every lane joined; carries traffic.
// Draining: lost a duplicate-channel race (or Goodbye sent); serves the
//   endpoints already on it, gets no new ones, closed when they are gone.
// Down: closed in an orderly way. Failed: reset, timed out or refused.
enum class ChannelState : std::uint8_t { Connecting, Handshaking, Up, Draining, Down, Failed };

constexpr std::string_view to_string(ChannelState s) noexcept {
  switch (s) {
    case ChannelState::Connecting: return "Connecting";
    case ChannelState::Handshaking: return "Handshaking";
    case ChannelState::Up: return "Up";
    case ChannelState::Draining: return "Draining";
    case ChannelState::Down: return "Down";
    case ChannelState::Failed: return "Failed";
  }
  return "Unknown";
}

// Whether a transition is legal; everything else is a bug (logged, refused).
constexpr bool can_transition(ChannelState from, ChannelState to) noexcept {
  using S = ChannelState;
  if (from == to) return false;
  switch (from) {
    case S::Connecting: return to == S::Handshaking || to == S::Failed || to == S::Down;
    case S::Handshaking: return to == S::Up || to == S::Failed || to == S::Down;
    case S::Up: return to == S::Draining || to == S::Failed || to == S::Down;
    case S::Draining: return to == S::Down || to == S::Failed;
    case S::Down:
    case S::Failed: return false;  // terminal: a new channel is a new object
  }
  return false;
}

inline constexpr std::uint32_t kMaxLanes = 8;
static_assert(kMaxLanes <= wire::kMaxQpsPerChannel);

// Auth: one data lane connection's handshake (daemon/peer/hello_proof.h),
// beside its Lane (which keeps only the lane's reliability). Dialer: the
// acceptor's Challenge (the Hello waits for it and for the connect) and our
// nonce; both sides: the lane Hello/HelloAck payload with its proof. Reset
// for every new connection of the lane (start_connect).
struct LaneAuth {
  bool dialed = false;      // our connect finished
  bool challenged = false;  // the acceptor's Challenge arrived
  wire::AuthNonce challenge{};
  wire::AuthNonce conn_nonce{};  // the dialer's nonce for this connection
  std::array<std::byte, wire::kHandshakeMaxWithRails> hello{};
  std::uint32_t hello_len = 0;
};

struct Channel {
  std::uint32_t id = 0;  // nonzero, never reused: a restarted peer gets a new channel
  ChannelState state = ChannelState::Connecting;
  bool initiated = false;  // we connected (false: we accepted)
  std::string address;     // HOST:PORT we connected to; empty for accepted channels
  std::string host;        // numeric host of `address` (lanes connect there too)
  std::uint16_t port = 0;
  std::uint64_t peer_epoch = 0;  // 0 until the handshake tells
  wire::Negotiated negotiated{};
  std::uint32_t superseded_by = 0;  // Draining duplicate: the channel that won

  // The peer's rails (its handshake's rails block; count 0: one rail, at
  // `host`): lane i dials the peer rail paired with the local rail it
  // leaves from (daemon/rails/rail_set.h). rail_skip: failed dials of the
  // lane, each moving it on to the next rail that is up.
  std::array<std::uint32_t, wire::kMaxHandshakeRails> peer_rails{};
  std::uint8_t peer_rail_count = 0;
  std::array<std::uint8_t, kMaxLanes> rail_skip{};
  std::uint64_t rail_returns_seen = 0;  // RailSet::returns_total() when the lanes last sat on their own rails

  transport::ConnId bootstrap = transport::kInvalidConn;
  LaneStats bootstrap_stats;
  std::array<Lane, kMaxLanes> lanes{};
  std::uint32_t lane_count = 0;  // negotiated k

  std::uint64_t created_ns = 0;
  std::uint64_t state_since_ns = 0;
  std::uint64_t deadline_ns = 0;  // handshake must finish by then
  std::uint64_t last_heard_ns = 0;
  std::uint64_t next_ping_ns = 0;
  std::uint64_t last_ping_ns = 0;  // 0: none sent yet (heartbeat.cpp)
  std::uint64_t rtt_us = 0;
  std::uint32_t missed = 0;           // heartbeat intervals without hearing from the peer
  std::uint32_t endpoints = 0;        // local endpoints + proxies bound to it
  std::uint64_t unused_since_ns = 0;  // Draining initiator: when endpoints reached 0 (close_if_unused)
  bool was_up = false;                // reached Up at least once (redial rate limit)
  // Lane rebuilds in the current window (lane_flow.cpp): a peer that
  // breaks lanes over and over loses the channel instead.
  std::uint32_t rebuilds_recent = 0;
  std::uint64_t rebuild_window_ns = 0;
  // Channels on demand (channel_lifecycle.cpp): past max_channels we asked the
  // peer to close this idle channel; new work waits until it answers.
  std::uint64_t last_active_ns = 0;  // last data message posted or received
  bool evicting = false;
  bool wanted = false;  // an Open waited for it while evicting: a new channel takes the Open over
  std::uint64_t evict_since_ns = 0;
  std::uint64_t evict_refused_ns = 0;  // the peer was busy: not asked again for a while

  // Shared-secret authentication (channel_auth.cpp; unused when it is off).
  wire::AuthNonce local_nonce{};
  wire::AuthNonce peer_nonce{};
  wire::AuthProof local_proof{};
  // Our Hello/HelloAck payload for this channel (it carries the channel's
  // nonce and proof); hello_len 0: the manager's shared payload. Here, not on
  // the stack: a posted WR's payload must stay valid until it is sent.
  std::array<std::byte, wire::kHandshakeMaxWithRails> hello{};
  std::uint32_t hello_len = 0;
  std::array<LaneAuth, kMaxLanes> lane_auth{};  // per lane connection: hello_proof.h

  bool usable() const noexcept { return state == ChannelState::Up || state == ChannelState::Draining; }
  bool finished() const noexcept { return state == ChannelState::Down || state == ChannelState::Failed; }
  // Ours, or its peer got a lane joined (with a secret: proved it holds it).
  // An unproven accepted channel may be any stranger at the port: it is
  // counted apart (peer_bootstrap_refusals) and logged at most once per 10 s.
  bool proven() const noexcept {
    bool p = initiated || was_up;
    for (std::uint32_t i = 0; i < lane_count && !p; ++i) p = lanes[i].joined();
    return p;
  }
  bool all_lanes_joined() const noexcept {
    for (std::uint32_t i = 0; i < lane_count; ++i) {
      if (!lanes[i].joined()) return false;
    }
    return lane_count != 0;
  }
};

}  // namespace ferry::daemon::peer
