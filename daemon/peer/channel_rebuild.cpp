// Rebuilding a broken data lane through the bootstrap connection
// (docs/reliability.md). A lane breaks when its connection closes
// or reports a failed WR (a QP in error, a reset socket), when a message is
// missing (a lane_seq gap), or when the peer leaves a message unacknowledged
// for twice peer_timeout_ms while it is otherwise alive (the retransmission
// timeout). TCP and RC deliver in order or fail the connection, so this only
// catches a message lost above them (a bug, the test-only drop switch) with
// nothing after it to show the gap; it is that long so the transport's own
// retries (RC's retry budget under a lossy link) finish first. While the bootstrap connection lives and the peer is the
// same daemon instance, the channel stays Up and its endpoints stay open:
//
//   1. Both sides drop the lane's connection and keep its ring: every WR
//      the peer has not confirmed (channel_lane_queue.cpp). New WRs queue
//      behind them. Credits start over: a new connection has new receives.
//   2. The initiator dials a new connection for that lane (never waiting for
//      it: tcp connects in the background, rdma through connect_async; a
//      failed dial is tried again every 200 ms) and sends a rejoin
//      Hello (token lane+1, kFlagRetransmit, ack = the last lane_seq it got
//      in order). The acceptor (dropping its old connection now if it had
//      not noticed) answers with a rejoin HelloAck carrying its own ack.
//   3. Each side completes what the other confirmed and posts the rest again
//      first, with the same lane_seq numbers; the receiver drops any copy it
//      already has by lane_seq. Nothing is lost, nothing arrives twice.
//
// A lane not rebuilt within peer_timeout_ms, more than kMaxRebuilds rebuilds
// of one channel within kRebuildWindowNs, or a peer whose ack does not match
// what we sent fails the whole channel as before: its operations complete
// with PeerReset.
#include <spdlog/spdlog.h>

#include "daemon/peer/channel_manager.h"

namespace ferry::daemon::peer {

namespace {

constexpr std::uint32_t kMaxRebuilds = 8;
constexpr std::uint64_t kRebuildWindowNs = 10'000'000'000;

}  // namespace

bool ChannelManager::rebuildable(Channel& ch, std::uint64_t now_ns) noexcept {
  if (!ch.usable() || ch.bootstrap == transport::kInvalidConn || rings_.find(ch.id) == rings_.end()) return false;
  if (now_ns - ch.rebuild_window_ns > kRebuildWindowNs) {
    ch.rebuild_window_ns = now_ns;
    ch.rebuilds_recent = 0;
  }
  return ch.rebuilds_recent < kMaxRebuilds;
}

void ChannelManager::break_lane(Channel& ch, std::uint32_t lane, std::string_view why, std::uint64_t now_ns) {
  if (ch.finished()) return;
  Lane& l = ch.lanes[lane];
  if (l.broken) return;  // already being rebuilt
  bump(counters_.lane_breaks);
  if (!rebuildable(ch, now_ns)) {
    spdlog::warn("channel {} ({}) lane {}: {}; not rebuilding ({}), failing the channel", ch.id, ch.address, lane, why,
                 ch.usable() ? "too many rebuilds" : "the channel is not up");
    fail(ch, Status::PeerReset, now_ns);
    return;
  }
  ++ch.rebuilds_recent;
  spdlog::warn("channel {} ({}) lane {}: {}; rebuilding the lane ({} unconfirmed and {} queued messages kept)", ch.id,
               ch.address.empty() ? "accepted" : ch.address, lane, why, l.stats.unconfirmed, l.stats.backlog);
  if (l.conn != transport::kInvalidConn) {
    // Forgotten first: completions of its WRs then find no lane (they are
    // the ring's to settle) and its Closed fails nothing.
    conns_.erase(key(l.conn, true));
    lanes_.close(l.conn);
  }
  l.conn = transport::kInvalidConn;
  l.joined = false;
  l.broken = true;
  l.broken_ns = now_ns;
  // Receives and credits belong to a connection: a new one starts afresh.
  l.peer_credits = 0;
  l.stats.credits = 0;
  l.stats.credits_owed = 0;
  l.owed_by_credit = 0;
  l.recv_unposted = 0;
  l.unposted_by_credit = 0;
  // A pending tcp connect leaves l.conn unset: no second dial before it
  // fails (lane_connect_failed moves redial_ns) or the budget runs out.
  l.redial_ns = now_ns + std::uint64_t{cfg_.connect_timeout_ms} * 1'000'000;
  if (ch.initiated) start_connect(ch, static_cast<std::int32_t>(lane), now_ns);
}

void ChannelManager::rejoin_accept(Channel& ch, std::uint32_t lane, transport::ConnId conn, const wire::Header& h,
                                   const wire::Handshake& remote, bool on_lanes, std::uint64_t now_ns) {
  Lane& l = ch.lanes[lane];
  // The initiator gave up the old connection; we may not have noticed yet.
  if (!l.broken) break_lane(ch, lane, "the peer replaced the lane's connection", now_ns);
  if (!ch.usable() || !l.broken) {
    refuse(conn, h.token, Status::PeerReset, on_lanes);
    return;
  }
  l.conn = conn;
  l.joined = true;
  l.broken = false;
  conns_[key(conn, on_lanes)] = ConnRef{ch.id, static_cast<std::int32_t>(lane)};
  lane_credits_from(ch, lane, remote.initial_credits, true);
  send_hello(ch, conn, h.token, true, Status::Ok, on_lanes);  // rejoin ack: our own ack first, then data
  replay(ch, lane, h.ack, now_ns);
}

void ChannelManager::rejoin_ack(Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
                                std::uint64_t now_ns) {
  Lane& l = ch.lanes[lane];
  if (!l.broken || l.conn == transport::kInvalidConn) {
    fail(ch, Status::ProtocolError, now_ns);
    return;
  }
  if (h.status != Status::Ok) {
    spdlog::warn("channel {} ({}) lane {}: the peer refused the rebuilt lane ({})", ch.id, ch.address, lane,
                 to_string(h.status));
    fail(ch, Status::PeerReset, now_ns);
    return;
  }
  wire::Handshake remote;
  if (wire::decode_handshake({payload, h.payload_len}, remote) != wire::WireError::None ||
      remote.daemon_epoch != ch.peer_epoch) {
    fail(ch, Status::PeerReset, now_ns);  // not the daemon instance we had: a restart
    return;
  }
  lane_credits_from(ch, lane, remote.initial_credits, false);
  l.joined = true;
  l.broken = false;
  replay(ch, lane, h.ack, now_ns);
}

void ChannelManager::rebuild_tick(Channel& ch, std::uint64_t now_ns) {
  if (!ch.usable()) return;
  const std::uint64_t budget_ns = std::uint64_t{cfg_.peer_timeout_ms} * 1'000'000;
  const std::uint64_t rto_ns = 2 * budget_ns;
  for (std::uint32_t i = 0; i < ch.lane_count && ch.usable(); ++i) {
    Lane& l = ch.lanes[i];
    if (l.broken) {
      if (now_ns - l.broken_ns > budget_ns) {
        spdlog::warn("channel {} ({}) lane {}: not rebuilt within {} ms; failing the channel", ch.id, ch.address, i,
                     cfg_.peer_timeout_ms);
        fail(ch, Status::PeerReset, now_ns);
      } else if (ch.initiated && l.conn == transport::kInvalidConn && now_ns >= l.redial_ns) {
        start_connect(ch, static_cast<std::int32_t>(i), now_ns);  // the last dial failed: again
      }
      continue;
    }
    if (l.acked == l.tx_seq || !l.joined) continue;
    const LaneRing* ring = ring_of(ch.id, i);
    if (ring == nullptr) continue;
    for (std::uint32_t k = 0; k < l.stats.unconfirmed; ++k) {
      const Slot& s = ring->slots[(ring->head + k) & (kBacklogCapacity - 1)];
      if (s.seq == 0 || !seq_before(l.acked, s.seq)) continue;
      // The oldest message the peer has not acknowledged. Acks ride on every
      // message and on the Credit the peer sends each tick it owes one, so
      // this long means the message (or the way back) is gone.
      if (now_ns - s.posted_ns > rto_ns) {
        break_lane(ch, i,
                   fmt::format("lane_seq {} unacknowledged for {} ms", s.seq, (now_ns - s.posted_ns) / 1'000'000),
                   now_ns);
      }
      break;
    }
  }
}

}  // namespace ferry::daemon::peer
