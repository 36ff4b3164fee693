// Lane flow: what moves the lanes of a usable channel once they joined.
// Every message in takes its receive credit and its ack (credits_in,
// take_ack) and is passed on only in lane_seq order (admit); a lane's
// backlog goes out as credits and the send queue allow (flush); and a
// lane that breaks (its connection closed, a WR failed, a lane_seq
// missing, a message unacknowledged past the retransmission timeout) is
// dropped with its ring kept and dialled again, then replayed from what
// the peer confirmed (break_lane, replay; docs/reliability.md). Each tick
// looks at every lane's rebuild deadline, retransmission timeout and idle
// grant (tick).
//
// The Lane (lane.h) owns a lane's credits, sequence numbers, acks and WR
// ring; LaneFlow decides what happens to them, and asks the channel layer
// (LaneFlowHost, the ChannelManager) for the two things it does not own:
// failing the channel, and dialling a lane's connection again.
#pragma once

#include <cstdint>
#include <string_view>

#include "daemon/counters.h"
#include "daemon/peer/channel.h"
#include "daemon/peer/channel_credits.h"
#include "daemon/peer/channel_table.h"
#include "ferry/status.h"
#include "transport/transport.h"
#include "transport/wire/handshake.h"
#include "transport/wire/header.h"

namespace ferry::daemon::peer {

class LaneFlowHost {
 public:
  // The channel cannot go on (reported down once, by the channel layer).
  virtual void fail_channel(Channel& ch, Status why, std::uint64_t now_ns) = 0;
  // Initiator: dial lane `lane`'s connection again (its rejoin Hello follows).
  virtual void redial_lane(Channel& ch, std::uint32_t lane, std::uint64_t now_ns) = 0;

 protected:
  ~LaneFlowHost() = default;
};

struct LaneFlowConfig {
  std::uint32_t peer_timeout_ms = 3000;     // a broken lane's rebuild budget; twice it: the retransmission timeout
  std::uint32_t connect_timeout_ms = 2000;  // a lane's redial
};

class LaneFlow {
 public:
  LaneFlow(LaneFlowHost& host, ChannelCredits& credits, ConnTable& conns, transport::Transport& lanes,
           Counters& counters, const LaneFlowConfig& cfg) noexcept
      : host_(host), credits_(credits), conns_(conns), lanes_(lanes), counters_(counters), cfg_(cfg) {}
  LaneFlow(const LaneFlow&) = delete;
  LaneFlow& operator=(const LaneFlow&) = delete;

  // Every message received on a lane: owes a receive, takes its grant.
  // false: the grant was too large and the channel failed.
  [[nodiscard]] bool credits_in(Channel& ch, std::uint32_t lane, const wire::Header& h, std::uint64_t now_ns) noexcept;
  // The initiator's lane HelloAck told the peer's credits (`remote`, its
  // handshake): the backlog posted while they were unknown goes now.
  void credits_from_ack(Channel& ch, std::uint32_t lane, const wire::Handshake& remote, std::uint64_t now_ns);
  // A message on a lane of a usable channel: its ack, then its lane_seq.
  // true: the next in order, for the engine. A Credit (its grant and ack
  // taken) and a duplicate are not; a gap breaks the lane, a bad ack fails
  // the channel.
  [[nodiscard]] bool admit(Channel& ch, std::uint32_t lane, const transport::Completion& c, std::uint64_t now_ns);
  // Posts what a lane's backlog can send; breaks the lane when refused.
  void flush(Channel& ch, std::uint32_t lane, std::uint64_t now_ns) noexcept;
  // The lane's connection is gone or untrustworthy: drop it, keep its WRs;
  // the initiator dials a new one. Fails the channel when it cannot.
  void break_lane(Channel& ch, std::uint32_t lane, std::string_view why, std::uint64_t now_ns);
  // A new connection joined a broken lane and the peer got up to peer_rx.
  void replay(Channel& ch, std::uint32_t lane, std::uint32_t peer_rx, std::uint64_t now_ns);
  // Each tick, per usable channel: rebuild deadlines (a broken lane not
  // rebuilt within peer_timeout_ms fails the channel; a failed dial goes
  // again), the retransmission timeout, idle grants and acks, backlogs
  // left by a Busy send queue.
  void tick(Channel& ch, std::uint64_t now_ns);

 private:
  // Whether a lane of `ch` may be rebuilt rather than failing the channel.
  bool rebuildable(Channel& ch, std::uint64_t now_ns) noexcept;
  // The peer's ack on a lane message; false: the channel failed.
  bool take_ack(Channel& ch, std::uint32_t lane, std::uint32_t ack, std::uint64_t now_ns) noexcept;

  LaneFlowHost& host_;
  ChannelCredits& credits_;
  ConnTable& conns_;
  transport::Transport& lanes_;
  Counters& counters_;
  LaneFlowConfig cfg_;
};

}  // namespace ferry::daemon::peer
