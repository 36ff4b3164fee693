// Receive credits on the data lanes (the protocol: channel_manager.h). Both
// transports run this one code path. Datapath parts allocate nothing: each
// lane's backlog is a ring preallocated when its channel comes up.
#include <spdlog/spdlog.h>

#include "daemon/peer/channel_manager.h"

namespace ferry::daemon::peer {

namespace {

// A receive of ours the peer used; grantable after the next lanes poll.
void note_used(Lane& l, bool by_credit, bool& reposts_due) noexcept {
  ++l.recv_unposted;
  if (by_credit) ++l.unposted_by_credit;
  reposts_due = true;
}

}  // namespace

void ChannelManager::start_credits(Channel& ch) {
  std::unique_ptr<ChannelRings>& r = rings_[ch.id];
  if (r) return;
  r = std::make_unique<ChannelRings>();
  for (std::uint32_t i = 0; i < ch.lane_count; ++i) (*r)[i].slots = std::make_unique<Slot[]>(kBacklogCapacity);
}

void ChannelManager::lane_credits_from(Channel& ch, std::uint32_t lane, std::uint32_t peer_initial,
                                       bool hello_received) {
  Lane& l = ch.lanes[lane];
  if (l.peer_credits != 0) return;  // told once per lane
  l.peer_credits = peer_initial;    // >= 1: decode_handshake refuses 0
  // Our handshake message on this lane (initiator: the Hello already sent;
  // acceptor: the HelloAck about to go, and with auth the Challenge before
  // it) used one of the peer's receives each.
  const std::uint32_t used = 1 + (auth_on() && !ch.initiated ? 1 : 0);
  l.stats.credits = peer_initial > used ? peer_initial - used : 0;
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

bool ChannelManager::send_credit(Channel& ch, std::uint32_t lane) noexcept {
  Lane& l = ch.lanes[lane];
  // The reserve credit exists for this message: a Credit may use the last one.
  if (l.stats.credits_owed == 0 || l.stats.credits == 0 || l.conn == transport::kInvalidConn) return false;
  transport::SendWr wr;
  wr.conn = l.conn;
  wr.header.type = wire::MsgType::Credit;
  wr.signaled = false;
  return post_unkept(l, wr).accepted == 1;
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

}  // namespace ferry::daemon::peer
