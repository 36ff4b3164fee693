// Every WR a data lane carries, in one preallocated ring per lane (the
// protocol: channel_manager.h). A WR waits in the backlog for a credit (or
// for a rebuilt connection), is posted with the next lane_seq, and stays as
// "unconfirmed" until the peer's cumulative ack covers it and, if signaled,
// the transport finished it. Only then does the engine hear its completion,
// so the memory it names (a client's arena) is still there if the lane
// breaks and the WR has to go again on a new connection (replay()). The
// receiver drops what it already has by lane_seq (channel_manager.cpp).
// Datapath parts allocate nothing.
#include <spdlog/spdlog.h>

#include <vector>

#include "daemon/peer/channel_manager.h"

namespace ferry::daemon::peer {

namespace {

constexpr std::uint32_t kMask = ChannelManager::kBacklogCapacity - 1;

// The lane's ring holds its posted-unconfirmed and waiting WRs together.
bool ring_full(const Lane& l) noexcept {
  return l.stats.unconfirmed + l.stats.backlog >= ChannelManager::kBacklogCapacity;
}

}  // namespace

ChannelManager::LaneRing* ChannelManager::ring_of(std::uint32_t channel, std::uint32_t lane) noexcept {
  auto it = rings_.find(channel);
  return it == rings_.end() ? nullptr : &(*it->second)[lane];
}

bool ChannelManager::has_room(const Channel& ch, std::uint32_t lane) const noexcept {
  if (!ch.usable() || ch.lane_count == 0) return true;  // post() reports PeerReset, not Busy
  const Lane& l = ch.lanes[lane % ch.lane_count];
  return rings_.contains(ch.id) && !ring_full(l);
}

transport::PostResult ChannelManager::post(Channel& ch, std::uint32_t lane, transport::SendWr wr) noexcept {
  transport::PostResult r;
  if (!ch.usable() || ch.lane_count == 0) {
    r.status = Status::PeerReset;
    return r;
  }
  const std::uint32_t li = lane % ch.lane_count;
  Lane& l = ch.lanes[li];
  LaneRing* ring = ring_of(ch.id, li);
  if (ring == nullptr || ring_full(l)) {
    r.status = Status::Busy;
    return r;
  }
  ring->slots[(ring->head + l.stats.unconfirmed + l.stats.backlog) & kMask] = Slot{wr, 0, 0, false};
  const bool waits = l.stats.backlog != 0;  // older WRs wait: the lane keeps its order
  ++l.stats.backlog;
  if (!waits && !l.broken && (!uses_receive(wr.op) || l.stats.credits > kCreditReserve)) {
    r = post_backlog(ch, li, 1);
    if (r.accepted == 1) return r;
    // Refused by the transport: its send queue is full (Busy), or the
    // connection is closing under us (its Closed or failed WRs break the
    // lane soon). Either way the WR waits in the backlog like one without a
    // credit: the next flush (tick, grant, rebuilt lane) posts it, and a
    // refusal for good there breaks the lane. The caller's op stays whole.
  }
  ++l.stats.credit_stalls;
  bump(counters_.credit_stalls);
  r.accepted = 1;
  r.status = Status::Ok;
  return r;
}

transport::PostResult ChannelManager::post_backlog(Channel& ch, std::uint32_t lane, std::uint32_t n) noexcept {
  Lane& l = ch.lanes[lane];
  LaneRing& ring = *ring_of(ch.id, lane);
  std::array<transport::SendWr, transport::kPostBatch> batch;
  if (n > batch.size()) n = static_cast<std::uint32_t>(batch.size());
  // Owed grants ride on the first Send; no other header may carry one (a
  // header copied from a received message would grant the peer's number).
  std::uint32_t carrier = n;
  std::uint32_t seq = l.tx_seq;
  const std::uint32_t first = ring.head + l.stats.unconfirmed;
  for (std::uint32_t k = 0; k < n; ++k) {
    transport::SendWr& w = ring.slots[(first + k) & kMask].wr;
    w.conn = l.conn;
    if (w.op == transport::WrOp::Send) {
      w.header.credit = 0;
      if (carrier == n && l.stats.credits_owed != 0) {
        carrier = k;
        w.header.credit = l.stats.credits_owed;
      }
      w.header.ack = l.rx_seq;
    }
    w.header.lane_seq = uses_receive(w.op) ? ++seq : 0;
    batch[k] = w;
  }
  const transport::PostResult r = lanes_.post_send(std::span<const transport::SendWr>(batch.data(), n));
  if (carrier < r.accepted) {
    l.stats.credits_owed = 0;
    l.owed_by_credit = 0;
  }
  for (std::uint32_t k = 0; k < r.accepted; ++k) {
    Slot& s = ring.slots[(first + k) & kMask];
    s.seq = batch[k].header.lane_seq;
    s.posted_ns = last_now_ns_;
    s.done = false;
    if (uses_receive(batch[k].op)) {
      --l.stats.credits;
      l.tx_seq = s.seq;
    }
    ++l.stats.tx_msgs;
    l.stats.tx_bytes += wire::kHeaderBytes + batch[k].payload_len;
  }
  l.stats.unconfirmed += r.accepted;
  l.stats.backlog -= r.accepted;
  return r;
}

transport::PostResult ChannelManager::post_unkept(Lane& l, transport::SendWr& wr) noexcept {
  wr.header.credit = l.stats.credits_owed;
  wr.header.ack = l.rx_seq;
  wr.header.lane_seq = 0;
  const transport::PostResult r = lanes_.post_send(std::span<const transport::SendWr>(&wr, 1));
  if (r.accepted == 1) {
    l.stats.credits_owed = 0;
    l.owed_by_credit = 0;
    if (uses_receive(wr.op)) --l.stats.credits;
    ++l.stats.tx_msgs;
    l.stats.tx_bytes += wire::kHeaderBytes;
  }
  return r;
}

void ChannelManager::flush_backlog(Channel& ch, std::uint32_t lane) noexcept {
  Lane& l = ch.lanes[lane];
  while (l.stats.backlog != 0 && ch.usable() && !l.broken && l.joined) {
    LaneRing* ring = ring_of(ch.id, lane);  // looked up each round: a failure below may end the channel
    if (ring == nullptr) return;
    std::uint32_t n = 0;
    std::uint32_t credits = l.stats.credits;
    const std::uint32_t first = ring->head + l.stats.unconfirmed;
    while (n < transport::kPostBatch && n < l.stats.backlog) {
      if (uses_receive(ring->slots[(first + n) & kMask].wr.op)) {
        if (credits <= kCreditReserve) break;
        --credits;
      }
      ++n;
    }
    if (n == 0) return;  // waits for more credits
    const transport::PostResult r = post_backlog(ch, lane, n);
    if (r.accepted == n) continue;
    if (r.status == Status::Busy) return;  // send queue full: the next tick retries
    // Refused for good: the connection is closing under us. Its WRs are
    // kept; a rebuilt connection takes them.
    break_lane(ch, lane, "the transport refused a post", last_now_ns_);
    return;
  }
}

bool ChannelManager::take_ack(Channel& ch, std::uint32_t lane, std::uint32_t ack, std::uint64_t now_ns) noexcept {
  Lane& l = ch.lanes[lane];
  if (ack == l.acked) return true;
  if (!seq_before(l.acked, ack) || !seq_at_most(ack, l.tx_seq)) {
    spdlog::warn("channel {} lane {}: the peer acks lane_seq {} but we sent up to {} (acked {}); failing the channel",
                 ch.id, lane, ack, l.tx_seq, l.acked);
    fail(ch, Status::ProtocolError, now_ns);
    return false;
  }
  l.acked = ack;
  report_confirmed(ch, lane);
  return ch.usable();
}

void ChannelManager::lane_send_done(Channel& ch, std::uint32_t lane, const transport::Completion& c,
                                    std::uint64_t now_ns) noexcept {
  if (c.status != Status::Ok) {
    // A failed WR means the connection is gone (QP in error, socket dead):
    // nothing the WR names is lost, it goes again on the rebuilt lane.
    break_lane(ch, lane, fmt::format("a WR failed ({})", to_string(c.status)), now_ns);
    return;
  }
  Lane& l = ch.lanes[lane];
  LaneRing* ring = ring_of(ch.id, lane);
  if (ring == nullptr) return;
  // Completions come in post order: this one finishes every WR before it.
  for (std::uint32_t k = 0; k < l.stats.unconfirmed; ++k) {
    Slot& s = ring->slots[(ring->head + k) & kMask];
    if (s.done) continue;
    if (s.wr.signaled && s.wr.user_data == c.user_data) {
      for (std::uint32_t j = 0; j <= k; ++j) ring->slots[(ring->head + j) & kMask].done = true;
      if (s.seq == 0) {
        // A READ we issued: its data is here, nothing for the peer to
        // confirm. Reported now, not behind older WRs waiting for an ack.
        s.wr.user_data = 0;
        events_.on_send_done(c.user_data, Status::Ok);
      }
      report_confirmed(ch, lane);
      return;
    }
  }
  spdlog::debug("channel {} lane {}: SendDone for {:#x} matches no kept WR ({} unconfirmed)", ch.id, lane, c.user_data,
                l.stats.unconfirmed);
}

void ChannelManager::report_confirmed(Channel& ch, std::uint32_t lane) noexcept {
  Lane& l = ch.lanes[lane];
  while (l.stats.unconfirmed != 0) {
    LaneRing* ring = ring_of(ch.id, lane);  // the engine below may end the channel
    if (ring == nullptr) return;
    Slot& s = ring->slots[ring->head & kMask];
    // Numbered: the peer has it (and the NIC let go of it when signaled).
    // Unnumbered (a READ we issued): the transport finished it.
    const bool confirmed = s.seq != 0 ? seq_at_most(s.seq, l.acked) && (s.done || !s.wr.signaled) : s.done;
    if (!confirmed) return;
    const bool report = s.wr.signaled && s.wr.user_data != 0;
    const std::uint64_t user_data = s.wr.user_data;
    ++ring->head;
    --l.stats.unconfirmed;
    if (report) events_.on_send_done(user_data, Status::Ok);
  }
}

void ChannelManager::replay(Channel& ch, std::uint32_t lane, std::uint32_t peer_rx, std::uint64_t now_ns) {
  Lane& l = ch.lanes[lane];
  LaneRing* ring = ring_of(ch.id, lane);
  if (ring == nullptr) return;
  if (!seq_at_most(l.acked, peer_rx) || !seq_at_most(peer_rx, l.tx_seq)) {
    spdlog::warn("channel {} lane {}: rebuilt, but the peer says it got up to lane_seq {} (we sent {}, acked {})",
                 ch.id, lane, peer_rx, l.tx_seq, l.acked);
    fail(ch, Status::ProtocolError, now_ns);
    return;
  }
  l.acked = peer_rx;
  // Compact the unconfirmed part towards the backlog behind it: what the
  // peer got (or a READ that finished) completes; the rest becomes the front
  // of the backlog, in its order, and keeps its numbers when posted again
  // (it is exactly lane_seq peer_rx+1 .. tx_seq). Completions are reported
  // after the ring is consistent again (the engine may post from them).
  std::vector<std::uint64_t> completed;  // control path: a rebuild
  std::uint32_t kept = 0, again = 0;
  const std::uint32_t n = l.stats.unconfirmed;
  for (std::uint32_t k = n; k-- > 0;) {
    Slot& s = ring->slots[(ring->head + k) & kMask];
    const bool delivered = s.seq != 0 ? seq_at_most(s.seq, peer_rx) : s.done;
    if (delivered) {
      if (s.wr.signaled && s.wr.user_data != 0) completed.push_back(s.wr.user_data);
      continue;
    }
    s.done = false;
    if (s.seq != 0) ++again;
    ++kept;
    const std::uint32_t to = ring->head + n - kept;
    if (to != ring->head + k) ring->slots[to & kMask] = s;
  }
  ring->head += n - kept;
  l.stats.unconfirmed = 0;
  l.stats.backlog += kept;
  l.tx_seq = peer_rx;
  l.stats.retransmits += again;
  ++l.stats.rebuilds;
  bump(counters_.retransmits, again);
  bump(counters_.recoveries);
  spdlog::info("channel {} lane {}: rebuilt; peer had lane_seq {}, {} messages go again, {} completed", ch.id, lane,
               peer_rx, again, completed.size());
  for (auto it = completed.rbegin(); it != completed.rend(); ++it) events_.on_send_done(*it, Status::Ok);
  if (ch.usable()) flush_backlog(ch, lane);
}

void ChannelManager::fail_backlog(Channel& ch) noexcept {
  auto it = rings_.find(ch.id);
  if (it == rings_.end()) return;
  // Taken out first: a post() from inside on_send_done finds no ring. The
  // connections are closed already (finish()), so no NIC still reads what
  // these WRs name.
  const std::unique_ptr<ChannelRings> rings = std::move(it->second);
  rings_.erase(it);
  for (std::uint32_t i = 0; i < ch.lane_count; ++i) {
    Lane& l = ch.lanes[i];
    LaneRing& r = (*rings)[i];
    const std::uint32_t waiting = l.stats.backlog;
    std::uint32_t n = l.stats.unconfirmed + waiting;
    l.stats.unconfirmed = l.stats.backlog = 0;
    for (; n != 0; --n, ++r.head) {
      // Posted unsignaled WRs never reported before either: their ops fail
      // (or move) with the channel in on_channel_down.
      const transport::SendWr& w = r.slots[r.head & kMask].wr;
      const bool posted = n > waiting;
      if (w.user_data != 0 && (w.signaled || !posted)) events_.on_send_done(w.user_data, Status::PeerReset);
    }
  }
}

}  // namespace ferry::daemon::peer
