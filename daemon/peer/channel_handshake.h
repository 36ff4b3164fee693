// The channel handshake: what our Hello says, and what each handshake
// message that arrives does to a channel. Initiator: bootstrap Hello(token
// 0) -> HelloAck, then one connection per data lane, each Hello(token
// lane+1) -> HelloAck; Up when every lane has joined. Acceptor: a Hello
// with token 0 starts a channel, a Hello with token N joins lane N-1 of the
// accepted channel with the same peer epoch. Version, epoch and lane checks
// refuse with a status in HelloAck, then close. A rebuilt lane rejoins with
// a Hello flagged kFlagRetransmit (docs/reliability.md); LaneFlow replays it.
//
// Duplicates: when both daemons connect to each other at once, two channels
// to the same peer epoch come Up. Both sides keep the one initiated by the
// daemon with the lower epoch (ties: the older channel), so they agree
// without another message. The loser goes Draining: it serves endpoints
// already on it, new work routes to the winner, and its initiator closes it
// once it has no endpoints.
//
// Auth: with a secret, the acceptor sends a Challenge on every accepted
// connection and joins no lane until a lane Hello carries the initiator's
// proof made for that connection (hello_proof.h; ChannelAuth holds the
// proofs). A refused lane proof costs the channel nothing.
//
// The ChannelManager owns the channels and the connections; it hands the
// handshake's messages here and does, as its HandshakeHost, what changes a
// channel's life: making one, its state, failing it, dialling its lanes,
// bringing it Up.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "daemon/counters.h"
#include "daemon/peer/channel.h"
#include "daemon/peer/channel_auth.h"
#include "daemon/peer/channel_config.h"
#include "daemon/peer/channel_credits.h"
#include "daemon/peer/channel_table.h"
#include "daemon/peer/lane_flow.h"
#include "daemon/peer/peer_index.h"
#include "ferry/status.h"
#include "transport/log_limiter.h"
#include "transport/transport.h"
#include "transport/wire/handshake.h"
#include "transport/wire/header.h"

namespace ferry::daemon::peer {

class HandshakeHost {
 public:
  // A new channel in the table (an accepted one: initiated false).
  virtual Channel& create_channel(bool initiated, std::uint64_t now_ns) = 0;
  virtual void set_state(Channel& ch, ChannelState to, std::uint64_t now_ns) = 0;
  virtual void fail_channel(Channel& ch, Status why, std::uint64_t now_ns) = 0;
  // Initiator, bootstrap answered: dial every data lane.
  virtual void open_lanes(Channel& ch, std::uint64_t now_ns) = 0;
  // Every lane joined: the channel is Up (duplicates resolved, the engine told).
  virtual void become_up(Channel& ch, std::uint64_t now_ns) = 0;
  // Several rails: which of the peer's rails lane `lane` reaches (at every join).
  virtual void note_peer_rail(Channel& ch, std::uint32_t lane) = 0;

 protected:
  ~HandshakeHost() = default;
};

// What the handshake reads and changes of the channel layer it belongs to.
struct HandshakeParts {
  ChannelTable& table;
  ChannelCredits& credits;
  LaneFlow& flow;
  transport::Transport& bootstrap;  // bootstrap connections
  transport::Transport& lanes;      // data lanes (== bootstrap unless split)
  bool split;
  Counters& counters;
  const ChannelConfig& cfg;  // the manager's: listen_port is set by its listen()
};

class ChannelHandshake {
 public:
  ChannelHandshake(HandshakeHost& host, const HandshakeParts& parts);
  ChannelHandshake(const ChannelHandshake&) = delete;
  ChannelHandshake& operator=(const ChannelHandshake&) = delete;

  // Our Hello's rails block (several rails, before listen()): where our
  // lanes come from, for the peer's choice of arena keys.
  void set_rails(std::uint8_t count, const std::array<std::uint32_t, wire::kMaxHandshakeRails>& ipv4);
  std::uint8_t rail_count() const noexcept { return rail_count_; }
  // Our Hello, encoded again (once the manager's configuration is final).
  void encode() noexcept { hello_len_ = static_cast<std::uint32_t>(wire::encode_handshake(local(), hello_)); }
  bool auth_on() const noexcept { return auth_.on(); }
  // A channel we dial: its auth state (nonce) before the bootstrap Hello.
  [[nodiscard]] bool start(Channel& ch) { return auth_.start(ch, local()); }

  // Messages in. A Hello on a connection no channel owns yet (bootstrap or
  // lane); a HelloAck or a Challenge on a channel's connection (lane -1:
  // the bootstrap).
  void on_hello(transport::ConnId conn, const wire::Header& h, const std::byte* payload, bool on_lanes,
                std::uint64_t now_ns);
  void on_hello_ack(Channel& ch, std::int32_t lane, const wire::Header& h, const std::byte* payload,
                    std::uint64_t now_ns);
  void on_challenge(Channel& ch, std::int32_t lane, const transport::Completion& c, std::uint64_t now_ns);

  // Messages out. Our Hello (or HelloAck) on `conn`: token 0 the bootstrap,
  // lane+1 a lane.
  void send_hello(Channel& ch, transport::ConnId conn, std::uint64_t token, bool ack, Status status, bool on_lanes);
  // Acceptor with auth: the Challenge on a newly accepted connection.
  void send_challenge(transport::ConnId conn, bool on_lanes);
  // The connection closed: no WR of it points at its Challenge any more.
  void closed(transport::ConnId conn, bool on_lanes) noexcept { challenges_.erase(conn, on_lanes); }

  // A channel came Up: if another Up channel joins the same peer, the
  // loser goes Draining (both sides pick the same one).
  void resolve_duplicate(Channel& ch, std::uint64_t now_ns);

 private:
  wire::Handshake local() const noexcept;
  bool same_data_path(const wire::Handshake& remote) const noexcept;
  transport::Transport& via(bool on_lanes) noexcept { return on_lanes ? lanes_ : bootstrap_; }
  void refuse(transport::ConnId conn, std::uint64_t token, Status status, bool on_lanes);
  void on_lane_hello(transport::ConnId conn, const wire::Header& h, const wire::Handshake& remote, bool on_lanes,
                     std::uint64_t now_ns);
  // The initiator's lane HelloAck told the peer's credits (LaneFlow takes them).
  void lane_credits_from_ack(Channel& ch, std::int32_t lane, const wire::Header& h, const std::byte* payload,
                             std::uint64_t now_ns);
  // A rebuilt lane. Acceptor: the rejoin Hello for lane `lane` on `conn`.
  // Initiator: its HelloAck.
  void rejoin_accept(Channel& ch, std::uint32_t lane, transport::ConnId conn, const wire::Header& h,
                     const wire::Handshake& remote, bool on_lanes, std::uint64_t now_ns);
  void rejoin_ack(Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
                  std::uint64_t now_ns);
  // Refuses the channel for authentication (logged, Goodbye, failed).
  void auth_failed(Channel& ch, std::string_view why, std::uint64_t now_ns);
  // A lane Hello whose proof fails: refused on its own connection, counted
  // and logged; the channel and its live lanes are left alone (a replay
  // must not cost them anything).
  void lane_proof_refused(const Channel& ch, transport::ConnId conn, const wire::Header& h, bool on_lanes);
  // Our handshake messages on a new lane connection that used the peer's
  // receives: the Hello or HelloAck, and the acceptor's Challenge with auth.
  std::uint32_t handshake_sent(const Channel& ch) const noexcept { return 1 + (auth_.on() && !ch.initiated ? 1 : 0); }

  HandshakeHost& host_;
  ChannelTable& table_;
  ChannelCredits& credits_;
  LaneFlow& flow_;
  transport::Transport& bootstrap_;
  transport::Transport& lanes_;
  bool split_;
  Counters& counters_;
  const ChannelConfig& cfg_;
  ChannelAuth auth_;
  Challenges challenges_;        // acceptor with auth: per accepted connection, until Closed
  std::uint8_t rail_count_ = 0;  // rails block of our handshake (0: none)
  std::array<std::uint32_t, wire::kMaxHandshakeRails> rail_ipv4_{};
  // Our Hello/HelloAck payload, encoded once: WR payloads must outlive the post.
  std::array<std::byte, wire::kHandshakeMaxWithRails> hello_{};
  std::uint32_t hello_len_ = 0;
  // Bootstrap Hellos come from whoever reaches the port: their log lines
  // (refusals, new accepted channels) at most once per 10 s, with a count.
  transport::LogLimiter stranger_log_;
};

}  // namespace ferry::daemon::peer
