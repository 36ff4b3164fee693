// Retiring a lane's ring (the protocol: lane.h): acks and SendDones confirm
// WRs in order, a rebuild replays exactly what the peer did not confirm, and
// close() fails what is left. Completions are told only when the ring is
// consistent: the receiver of one may post on this lane again, or close it.
#include <spdlog/spdlog.h>

#include <vector>

#include "daemon/peer/lane.h"

namespace ferry::daemon::peer {

bool Lane::take_ack(std::uint32_t ack) noexcept {
  if (ack == acked_) return true;
  if (!seq_before(acked_, ack) || !seq_at_most(ack, tx_seq_)) return false;
  acked_ = ack;
  report_confirmed();
  return true;
}

void Lane::send_done(std::uint64_t user_data) noexcept {
  if (!is_open()) return;
  // Completions come in post order: this one finishes every WR before it.
  for (std::uint32_t k = 0; k < stats_.unconfirmed; ++k) {
    Slot& s = at(head_ + k);
    if (s.done) continue;
    if (s.wr.signaled && s.wr.user_data == user_data) {
      for (std::uint32_t j = 0; j <= k; ++j) at(head_ + j).done = true;
      if (s.seq == 0) {
        // A READ we issued: its data is here, nothing for the peer to
        // confirm. Reported now, not behind older WRs waiting for an ack.
        s.wr.user_data = 0;
        done_->on_send_done(user_data, Status::Ok);
      }
      report_confirmed();
      return;
    }
  }
  spdlog::debug("lane: SendDone for {:#x} matches no kept WR ({} unconfirmed)", user_data, stats_.unconfirmed);
}

void Lane::report_confirmed() noexcept {
  while (stats_.unconfirmed != 0 && is_open()) {  // a completion below may close the lane
    Slot& s = at(head_);
    // Numbered: the peer has it (and the NIC let go of it when signaled).
    // Unnumbered (a READ we issued): the transport finished it.
    const bool confirmed = s.seq != 0 ? seq_at_most(s.seq, acked_) && (s.done || !s.wr.signaled) : s.done;
    if (!confirmed) return;
    const bool report = s.wr.signaled && s.wr.user_data != 0;
    const std::uint64_t user_data = s.wr.user_data;
    ++head_;
    --stats_.unconfirmed;
    if (stats_.unconfirmed == 0 && stats_.backlog == 0) head_ = 0;  // empty: the next WR reuses slot 0's page
    if (report) done_->on_send_done(user_data, Status::Ok);
  }
}

std::optional<std::uint64_t> Lane::oldest_unacked_ns() const noexcept {
  if (!is_open() || acked_ == tx_seq_) return std::nullopt;
  for (std::uint32_t k = 0; k < stats_.unconfirmed; ++k) {
    const Slot& s = at(head_ + k);
    if (s.seq != 0 && seq_before(acked_, s.seq)) return s.posted_ns;
  }
  return std::nullopt;
}

bool Lane::replay(std::uint32_t peer_rx) noexcept {
  if (!is_open()) return true;
  if (!seq_at_most(acked_, peer_rx) || !seq_at_most(peer_rx, tx_seq_)) return false;
  acked_ = peer_rx;
  // Compact the unconfirmed part towards the backlog behind it: what the
  // peer got (or a READ that finished) completes; the rest becomes the front
  // of the backlog, in its order, and keeps its numbers when posted again
  // (it is exactly lane_seq peer_rx+1 .. tx_seq).
  std::vector<std::uint64_t> completed;  // control path: a rebuild
  std::uint32_t kept = 0, again = 0;
  const std::uint32_t n = stats_.unconfirmed;
  for (std::uint32_t k = n; k-- > 0;) {
    Slot& s = at(head_ + k);
    const bool delivered = s.seq != 0 ? seq_at_most(s.seq, peer_rx) : s.done;
    if (delivered) {
      if (s.wr.signaled && s.wr.user_data != 0) completed.push_back(s.wr.user_data);
      continue;
    }
    s.done = false;
    if (s.seq != 0) ++again;
    ++kept;
    const std::uint32_t to = head_ + n - kept;
    if (to != head_ + k) at(to) = s;
  }
  head_ += n - kept;
  stats_.unconfirmed = 0;
  stats_.backlog += kept;
  tx_seq_ = peer_rx;
  stats_.retransmits += again;
  ++stats_.rebuilds;
  bump(counters_->retransmits, again);
  bump(counters_->recoveries);
  for (auto it = completed.rbegin(); it != completed.rend(); ++it) done_->on_send_done(*it, Status::Ok);
  return true;
}

void Lane::close() noexcept {
  release_lent();  // the connection is closed already (lane.h)
  if (!is_open()) return;
  // Taken out first: a post() from inside on_send_done finds no ring.
  const Ring slots = std::move(slots_);
  const std::uint32_t waiting = stats_.backlog;
  std::uint32_t n = stats_.unconfirmed + waiting;
  stats_.unconfirmed = stats_.backlog = 0;
  for (; n != 0; --n, ++head_) {
    // Posted unsignaled WRs never reported before either: their ops fail
    // (or move) with the channel in on_channel_down.
    const transport::SendWr& w = slots[head_ & kMask].wr;
    const bool posted = n > waiting;
    if (w.user_data != 0 && (w.signaled || !posted)) done_->on_send_done(w.user_data, Status::PeerReset);
  }
}

}  // namespace ferry::daemon::peer
