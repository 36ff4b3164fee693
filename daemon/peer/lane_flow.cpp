// LaneFlow: see lane_flow.h. The rebuild protocol (the rejoin Hello and
// its ack) is the handshake's (channel_handshake.h);
// what a rebuilt lane sends again is decided here.
#include "daemon/peer/lane_flow.h"

#include <spdlog/spdlog.h>

#include <optional>

namespace ferry::daemon::peer {

namespace {

constexpr std::uint32_t kMaxRebuilds = 8;
constexpr std::uint64_t kRebuildWindowNs = 10'000'000'000;

}  // namespace

bool LaneFlow::credits_in(Channel& ch, std::uint32_t lane, const wire::Header& h, std::uint64_t now_ns) noexcept {
  Lane& l = ch.lanes[lane];
  credits_.received();
  if (!l.on_received(h.type == wire::MsgType::Credit, h.credit)) {
    spdlog::warn("channel {} lane {}: grant of {} credits exceeds the peer's {} (we hold {}); failing the channel",
                 ch.id, lane, h.credit, l.peer_credits(), l.stats().credits);
    host_.fail_channel(ch, Status::ProtocolError, now_ns);
    return false;
  }
  if (h.credit == 0) return true;
  if (l.waiting()) flush(ch, lane, now_ns);
  // A grant due earlier that found us without any credit goes now.
  if (credits_.grant_due(l) && ch.usable()) (void)l.post_credit();  // else: the next grant or tick
  return true;
}

void LaneFlow::credits_from_ack(Channel& ch, std::uint32_t lane, const wire::Handshake& remote, std::uint64_t now_ns) {
  credits_.answered(ch.lanes[lane], remote);
  // The channel may have gone Up before this ack (channel_manager.cpp
  // on_recv): WRs posted meanwhile wait in the backlog for these credits.
  if (ch.lanes[lane].waiting()) flush(ch, lane, now_ns);
}

bool LaneFlow::admit(Channel& ch, std::uint32_t lane, const transport::Completion& c, std::uint64_t now_ns) {
  Lane& l = ch.lanes[lane];
  // rdma: a WRITE with immediate has no header (the transport makes a
  // WriteDone of it): next in order, no ack. Everything else carries both.
  const bool implicit = c.header.type == wire::MsgType::WriteDone && c.header.lane_seq == 0;
  if (!implicit && !take_ack(ch, lane, c.header.ack, now_ns)) return false;
  if (c.header.type == wire::MsgType::Credit) return false;  // its grant and ack are taken: nothing for the engine
  const std::uint32_t expect = l.rx_seq() + 1;
  switch (l.accept_seq(implicit ? expect : c.header.lane_seq)) {
    case RxOrder::Next: return true;
    case RxOrder::Duplicate:
      bump(counters_.duplicates_dropped);
      spdlog::debug("channel {} lane {}: lane_seq {} again (have {}); dropped", ch.id, lane, c.header.lane_seq,
                    l.rx_seq());
      return false;
    case RxOrder::Gap:
      break_lane(ch, lane,
                 fmt::format("lane_seq {} arrived, {} expected: a message is missing", c.header.lane_seq, expect),
                 now_ns);
      return false;
  }
  return false;
}

void LaneFlow::flush(Channel& ch, std::uint32_t lane, std::uint64_t now_ns) noexcept {
  if (!ch.usable()) return;
  // Refused for good: the connection is closing under us. Its WRs are kept;
  // a rebuilt connection takes them.
  if (ch.lanes[lane].flush(now_ns) == Flush::Refused) break_lane(ch, lane, "the transport refused a post", now_ns);
}

bool LaneFlow::take_ack(Channel& ch, std::uint32_t lane, std::uint32_t ack, std::uint64_t now_ns) noexcept {
  Lane& l = ch.lanes[lane];
  if (!l.take_ack(ack)) {
    spdlog::warn("channel {} lane {}: the peer acks lane_seq {} but we sent up to {} (acked {}); failing the channel",
                 ch.id, lane, ack, l.tx_seq(), l.acked());
    host_.fail_channel(ch, Status::ProtocolError, now_ns);
    return false;
  }
  return ch.usable();
}

bool LaneFlow::rebuildable(Channel& ch, std::uint64_t now_ns) noexcept {
  if (!ch.usable() || ch.bootstrap == transport::kInvalidConn || ch.lane_count == 0 || !ch.lanes[0].is_open()) {
    return false;
  }
  if (now_ns - ch.rebuild_window_ns > kRebuildWindowNs) {
    ch.rebuild_window_ns = now_ns;
    ch.rebuilds_recent = 0;
  }
  return ch.rebuilds_recent < kMaxRebuilds;
}

void LaneFlow::break_lane(Channel& ch, std::uint32_t lane, std::string_view why, std::uint64_t now_ns) {
  if (ch.finished()) return;
  Lane& l = ch.lanes[lane];
  if (l.broken()) return;  // already being rebuilt
  bump(counters_.lane_breaks);
  if (!rebuildable(ch, now_ns)) {
    spdlog::warn("channel {} ({}) lane {}: {}; not rebuilding ({}), failing the channel", ch.id, ch.address, lane, why,
                 ch.usable() ? "too many rebuilds" : "the channel is not up");
    host_.fail_channel(ch, Status::PeerReset, now_ns);
    return;
  }
  ++ch.rebuilds_recent;
  spdlog::warn("channel {} ({}) lane {}: {}; rebuilding the lane ({} unconfirmed and {} queued messages kept)", ch.id,
               ch.address.empty() ? "accepted" : ch.address, lane, why, l.stats().unconfirmed, l.stats().backlog);
  if (l.conn() != transport::kInvalidConn) {
    // Forgotten first: completions of its WRs then find no lane (they are
    // the ring's to settle) and its Closed fails nothing.
    conns_.erase(l.conn(), true);
    (void)lanes_.close(l.conn());  // the lane is rebuilt either way; EndpointClosed: gone already
  }
  // A pending connect leaves conn unset: no second dial before it fails
  // (lane_connect_failed moves redial_ns) or the budget runs out.
  l.break_conn(now_ns, now_ns + std::uint64_t{cfg_.connect_timeout_ms} * 1'000'000);
  if (ch.initiated) host_.redial_lane(ch, lane, now_ns);
}

void LaneFlow::replay(Channel& ch, std::uint32_t lane, std::uint32_t peer_rx, std::uint64_t now_ns) {
  Lane& l = ch.lanes[lane];
  const std::uint32_t sent = l.tx_seq(), acked = l.acked();
  if (!l.replay(peer_rx)) {
    spdlog::warn("channel {} lane {}: rebuilt, but the peer says it got up to lane_seq {} (we sent {}, acked {})",
                 ch.id, lane, peer_rx, sent, acked);
    host_.fail_channel(ch, Status::ProtocolError, now_ns);
    return;
  }
  spdlog::info("channel {} lane {}: rebuilt; peer had lane_seq {}, {} messages go again", ch.id, lane, peer_rx,
               sent - peer_rx);
  flush(ch, lane, now_ns);
}

void LaneFlow::tick(Channel& ch, std::uint64_t now_ns) {
  const std::uint64_t budget_ns = std::uint64_t{cfg_.peer_timeout_ms} * 1'000'000;
  const std::uint64_t rto_ns = 2 * budget_ns;
  for (std::uint32_t i = 0; i < ch.lane_count && ch.usable(); ++i) {
    Lane& l = ch.lanes[i];
    if (l.broken()) {
      if (now_ns - l.broken_ns() > budget_ns) {
        spdlog::warn("channel {} ({}) lane {}: not rebuilt within {} ms; failing the channel", ch.id, ch.address, i,
                     cfg_.peer_timeout_ms);
        host_.fail_channel(ch, Status::PeerReset, now_ns);
      } else if (ch.initiated && l.conn() == transport::kInvalidConn && now_ns >= l.redial_ns()) {
        host_.redial_lane(ch, i, now_ns);  // the last dial failed: again
      }
      continue;
    }
    if (!l.joined()) continue;
    // The oldest message the peer has not acknowledged. Acks ride on every
    // message and on the Credit the peer sends each tick it owes one, so
    // this long means the message (or the way back) is gone.
    const std::optional<std::uint64_t> oldest = l.oldest_unacked_ns();
    if (oldest && now_ns - *oldest > rto_ns) {
      break_lane(ch, i,
                 fmt::format("lane_seq {} unacknowledged for {} ms", l.acked() + 1, (now_ns - *oldest) / 1'000'000),
                 now_ns);
      continue;
    }
    // Idle lane: grant what data used, and ack what has waited a tick (a
    // pooled grant may be nothing). Receives used by the peer's Credit
    // messages alone wait for a piggyback or the threshold, else two idle
    // daemons would trade one-credit Credit messages forever.
    const bool ack = l.ack_overdue();
    if (ack || l.owes_for_data()) (void)l.post_credit();  // not taken: the next tick tries again
    if (l.waiting()) flush(ch, i, now_ns);                // after a Busy send queue
  }
}

}  // namespace ferry::daemon::peer
