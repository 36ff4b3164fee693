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

struct LaneStats {
  std::uint64_t tx_msgs = 0;
  std::uint64_t rx_msgs = 0;
  std::uint64_t tx_bytes = 0;
  std::uint64_t rx_bytes = 0;
  std::uint64_t inflight = 0;  // snapshots only: remote ops awaiting an answer on this lane (the sender's books)
  // Receive credits (channel_credits.cpp): a message that consumes a receive
  // at the peer (SEND, WRITE with immediate) is posted only with a credit.
  std::uint32_t credits = 0;        // receives the peer has posted for us that we may still use
  std::uint32_t credits_owed = 0;   // receives we consumed and reposted, not yet granted back
  std::uint32_t backlog = 0;        // messages waiting here for a credit
  std::uint64_t credit_stalls = 0;  // messages that had to wait for a credit
  // Reliability (channel_lane_queue.cpp, channel_rebuild.cpp).
  std::uint32_t unconfirmed = 0;  // posted WRs kept until the peer confirms them
  std::uint64_t retransmits = 0;  // messages posted again after a rebuild
  std::uint64_t rebuilds = 0;     // times this lane's connection was replaced
  // Snapshots only (ChannelManager::snapshot copies them from the Lane).
  std::uint32_t tx_seq = 0, rx_seq = 0, acked = 0;
};

struct Lane {
  transport::ConnId conn = transport::kInvalidConn;
  bool joined = false;  // handshake on this connection done
  LaneStats stats;
  // Credit bookkeeping beside the stats (channel_credits.cpp).
  std::uint32_t peer_credits = 0;        // the peer's initial_credits here; 0 until its Hello/HelloAck
  std::uint32_t recv_unposted = 0;       // receives used since the last lanes poll: not reposted yet
  std::uint32_t unposted_by_credit = 0;  // ... of them used by pure Credit messages
  std::uint32_t owed_by_credit = 0;      // part of stats.credits_owed used by pure Credit messages
  // Sequence numbers (header lane_seq/ack; serial arithmetic, they wrap).
  // Every WR that uses a receive at the peer is numbered; the WR stays in
  // the lane's ring until the peer's cumulative ack covers it, so a rebuilt
  // lane can post again exactly what the peer did not get.
  std::uint32_t tx_seq = 0;  // lane_seq of the last numbered WR posted
  std::uint32_t rx_seq = 0;  // lane_seq of the last message received in order
  std::uint32_t acked = 0;   // the peer's cumulative ack
  // The connection died while the channel lives on: posts queue until a new
  // connection joins (channel_rebuild.cpp).
  bool broken = false;
  std::uint64_t broken_ns = 0;
  std::uint64_t redial_ns = 0;  // initiator, broken, no connect under way: dial again then
};

// Serial-number order for lane_seq/ack (RFC 1982 style, 32 bits).
constexpr bool seq_before(std::uint32_t a, std::uint32_t b) noexcept { return static_cast<std::int32_t>(a - b) < 0; }
constexpr bool seq_at_most(std::uint32_t a, std::uint32_t b) noexcept { return !seq_before(b, a); }

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

  transport::ConnId bootstrap = transport::kInvalidConn;
  LaneStats bootstrap_stats;
  std::array<Lane, kMaxLanes> lanes{};
  std::uint32_t lane_count = 0;  // negotiated k

  std::uint64_t created_ns = 0;
  std::uint64_t state_since_ns = 0;
  std::uint64_t deadline_ns = 0;  // handshake must finish by then
  std::uint64_t last_heard_ns = 0;
  std::uint64_t next_ping_ns = 0;
  std::uint64_t rtt_us = 0;
  std::uint32_t missed = 0;           // heartbeat intervals without hearing from the peer
  std::uint32_t endpoints = 0;        // local endpoints + proxies bound to it
  std::uint64_t unused_since_ns = 0;  // Draining initiator: when endpoints reached 0 (close_if_unused)
  bool was_up = false;                // reached Up at least once (redial rate limit)
  // Lane rebuilds in the current window (channel_rebuild.cpp): a peer that
  // breaks lanes over and over loses the channel instead.
  std::uint32_t rebuilds_recent = 0;
  std::uint64_t rebuild_window_ns = 0;

  // Shared-secret authentication (channel_auth.cpp; unused when it is off).
  wire::AuthNonce local_nonce{};
  wire::AuthNonce peer_nonce{};
  wire::AuthProof local_proof{};
  // Our Hello/HelloAck payload for this channel (it carries the channel's
  // nonce and proof); hello_len 0: the manager's shared payload. Here, not on
  // the stack: a posted WR's payload must stay valid until it is sent.
  std::array<std::byte, wire::kHandshakeMaxBytes> hello{};
  std::uint32_t hello_len = 0;

  bool usable() const noexcept { return state == ChannelState::Up || state == ChannelState::Draining; }
  bool finished() const noexcept { return state == ChannelState::Down || state == ChannelState::Failed; }
  bool all_lanes_joined() const noexcept {
    for (std::uint32_t i = 0; i < lane_count; ++i) {
      if (!lanes[i].joined) return false;
    }
    return lane_count != 0;
  }
};

}  // namespace ferry::daemon::peer
