// Receive credits on the data lanes (the protocol: channel_manager.h). Both
// transports run this one code path. Datapath parts allocate nothing: each
// lane's backlog is a ring preallocated when its channel comes up.
#include <spdlog/spdlog.h>

#include "daemon/peer/channel_manager.h"

namespace ferry::daemon::peer {

namespace {

constexpr std::uint32_t kBacklogMask = ChannelManager::kBacklogCapacity - 1;

// A receive of ours the peer used; grantable after the next lanes poll.
void note_used(Lane& l, bool by_credit, bool& reposts_due) noexcept {
  ++l.recv_unposted;
  if (by_credit) ++l.unposted_by_credit;
  reposts_due = true;
}

}  // namespace

void ChannelManager::start_credits(Channel& ch) {
  std::unique_ptr<ChannelBacklog>& b = backlogs_[ch.id];
  if (b) return;
  b = std::make_unique<ChannelBacklog>();
  for (std::uint32_t i = 0; i < ch.lane_count; ++i) {
    (*b)[i].ring = std::make_unique<transport::SendWr[]>(kBacklogCapacity);
  }
}

void ChannelManager::lane_credits_from(Channel& ch, std::uint32_t lane, std::uint32_t peer_initial,
                                       bool hello_received) {
  Lane& l = ch.lanes[lane];
  if (l.peer_credits != 0) return;  // told once per lane
  l.peer_credits = peer_initial;    // >= 1: decode_handshake refuses 0
  // Our handshake message on this lane (initiator: the Hello already sent;
  // acceptor: the HelloAck about to go) used one of the peer's receives.
  l.stats.credits = peer_initial - 1;
  if (hello_received) note_used(l, false, reposts_due_);
}

void ChannelManager::lane_credits_from_ack(Channel& ch, std::int32_t lane, const wire::Header& h,
                                           const std::byte* payload) {
  if (lane < 0 || h.status != Status::Ok || !ch.initiated) return;
  wire::Handshake remote;
  // A bad payload is refused by on_hello_ack itself; nothing to learn here.
  if (wire::decode_handshake({payload, h.payload_len}, remote) != wire::WireError::None) return;
  const auto i = static_cast<std::uint32_t>(lane);
  lane_credits_from(ch, i, remote.initial_credits, false);
  // The channel may have gone Up before this ack (channel_manager.cpp
  // on_recv): WRs posted meanwhile wait in the backlog for these credits.
  if (ch.lanes[i].stats.backlog != 0) flush_backlog(ch, i);
}

bool ChannelManager::credits_in(Channel& ch, std::uint32_t lane, const wire::Header& h, std::uint64_t now_ns) noexcept {
  Lane& l = ch.lanes[lane];
  note_used(l, h.type == wire::MsgType::Credit, reposts_due_);
  if (h.credit == 0) return true;
  // credits + what we used and were not granted back == peer_credits, so a
  // larger grant returns receives we never used: the peer miscounts.
  if (l.peer_credits == 0 || h.credit > l.peer_credits - l.stats.credits) {
    spdlog::warn("channel {} lane {}: grant of {} credits exceeds the peer's {} (we hold {}); failing the channel",
                 ch.id, lane, h.credit, l.peer_credits, l.stats.credits);
    fail(ch, Status::ProtocolError, now_ns);
    return false;
  }
  l.stats.credits += h.credit;
  if (l.stats.backlog != 0) flush_backlog(ch, lane);
  // A grant due earlier that found us without any credit goes now.
  if (l.stats.credits_owed >= grant_threshold_ && ch.usable()) send_credit(ch, lane);
  return true;
}

void ChannelManager::credits_reposted() noexcept {
  if (!reposts_due_) return;
  reposts_due_ = false;
  for (auto& [id, ch] : channels_) {
    if (ch->finished()) continue;
    for (std::uint32_t i = 0; i < ch->lane_count; ++i) {
      Lane& l = ch->lanes[i];
      if (l.recv_unposted == 0) continue;
      l.stats.credits_owed += l.recv_unposted;
      l.owed_by_credit += l.unposted_by_credit;
      l.recv_unposted = l.unposted_by_credit = 0;
      // One-way traffic has nothing to piggyback on: grant explicitly.
      if (l.stats.credits_owed >= grant_threshold_ && ch->usable()) send_credit(*ch, i);
    }
  }
}

transport::PostResult ChannelManager::post_now(Lane& l, std::span<transport::SendWr> wrs) noexcept {
  // Owed grants ride on the first Send; no other header may carry one (a
  // header copied from a received message would grant the peer's number).
  std::size_t carrier = wrs.size();
  for (std::size_t k = 0; k < wrs.size(); ++k) {
    if (wrs[k].op != transport::WrOp::Send) continue;
    wrs[k].header.credit = 0;
    if (carrier == wrs.size() && l.stats.credits_owed != 0) {
      carrier = k;
      wrs[k].header.credit = l.stats.credits_owed;
    }
  }
  const transport::PostResult r = lanes_.post_send(wrs);
  if (carrier < r.accepted) {
    l.stats.credits_owed = 0;
    l.owed_by_credit = 0;
  }
  for (std::uint32_t k = 0; k < r.accepted; ++k) {
    if (uses_receive(wrs[k].op)) --l.stats.credits;
    ++l.stats.tx_msgs;
    l.stats.tx_bytes += wire::kHeaderBytes + wrs[k].payload_len;
  }
  return r;
}

transport::PostResult ChannelManager::post(Channel& ch, std::uint32_t lane, transport::SendWr wr) noexcept {
  transport::PostResult r;
  if (!ch.usable() || ch.lane_count == 0) {
    r.status = Status::PeerReset;
    return r;
  }
  const std::uint32_t li = lane % ch.lane_count;
  Lane& l = ch.lanes[li];
  wr.conn = l.conn;
  if (l.stats.backlog == 0 && (!uses_receive(wr.op) || l.stats.credits > kCreditReserve)) {
    return post_now(l, std::span<transport::SendWr>(&wr, 1));
  }
  // No credit, or older WRs already wait (the lane keeps its order).
  auto it = backlogs_.find(ch.id);
  if (it == backlogs_.end() || l.stats.backlog >= kBacklogCapacity) {
    r.status = Status::Busy;
    return r;
  }
  LaneBacklog& b = (*it->second)[li];
  b.ring[(b.head + l.stats.backlog) & kBacklogMask] = wr;
  ++l.stats.backlog;
  ++l.stats.credit_stalls;
  bump(counters_.credit_stalls);
  r.accepted = 1;
  return r;
}

void ChannelManager::flush_backlog(Channel& ch, std::uint32_t lane) noexcept {
  Lane& l = ch.lanes[lane];
  while (l.stats.backlog != 0 && ch.usable()) {
    auto it = backlogs_.find(ch.id);  // looked up each round: on_send_done below may end the channel
    if (it == backlogs_.end()) return;
    LaneBacklog& b = (*it->second)[lane];
    std::array<transport::SendWr, transport::kPostBatch> batch;
    std::uint32_t n = 0;
    std::uint32_t credits = l.stats.credits;
    while (n < batch.size() && n < l.stats.backlog) {
      const transport::SendWr& w = b.ring[(b.head + n) & kBacklogMask];
      if (uses_receive(w.op)) {
        if (credits <= kCreditReserve) break;
        --credits;
      }
      batch[n++] = w;
    }
    if (n == 0) return;  // waits for more credits
    const transport::PostResult r = post_now(l, std::span<transport::SendWr>(batch.data(), n));
    b.head += r.accepted;
    l.stats.backlog -= r.accepted;
    if (r.accepted == n) continue;
    if (r.status == Status::Busy) return;  // send queue full: the next tick retries
    // Refused for good (connection closing, bad WR): it was accepted from
    // the caller's view, so it completes as a failure, like a transport WR.
    const std::uint64_t user_data = b.ring[b.head & kBacklogMask].user_data;
    ++b.head;
    --l.stats.backlog;
    events_.on_send_done(user_data, r.status);
  }
}

bool ChannelManager::send_credit(Channel& ch, std::uint32_t lane) noexcept {
  Lane& l = ch.lanes[lane];
  // The reserve credit exists for this message: a Credit may use the last one.
  if (l.stats.credits_owed == 0 || l.stats.credits == 0 || l.conn == transport::kInvalidConn) return false;
  transport::SendWr wr;
  wr.conn = l.conn;
  wr.header.type = wire::MsgType::Credit;
  wr.signaled = false;
  return post_now(l, std::span<transport::SendWr>(&wr, 1)).accepted == 1;
}

void ChannelManager::credit_tick(Channel& ch) noexcept {
  if (!ch.usable()) return;
  for (std::uint32_t i = 0; i < ch.lane_count; ++i) {
    Lane& l = ch.lanes[i];
    // Idle lane: grant what data used. Receives used by the peer's Credit
    // messages alone wait for a piggyback or the threshold, else two idle
    // daemons would trade one-credit Credit messages forever.
    if (l.stats.credits_owed > l.owed_by_credit) send_credit(ch, i);
    if (l.stats.backlog != 0) flush_backlog(ch, i);  // after a Busy send queue
  }
}

void ChannelManager::fail_backlog(Channel& ch) noexcept {
  auto it = backlogs_.find(ch.id);
  if (it == backlogs_.end()) return;
  // Taken out first: a post() from inside on_send_done finds no backlog.
  const std::unique_ptr<ChannelBacklog> b = std::move(it->second);
  backlogs_.erase(it);
  for (std::uint32_t i = 0; i < ch.lane_count; ++i) {
    Lane& l = ch.lanes[i];
    LaneBacklog& lb = (*b)[i];
    while (l.stats.backlog != 0) {
      const std::uint64_t user_data = lb.ring[lb.head & kBacklogMask].user_data;
      ++lb.head;
      --l.stats.backlog;
      events_.on_send_done(user_data, Status::PeerReset);
    }
  }
}

}  // namespace ferry::daemon::peer
