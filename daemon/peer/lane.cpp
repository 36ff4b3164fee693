// A lane's credits and posting (the protocol: lane.h). Datapath parts
// allocate nothing: the ring is allocated by open().
#include "daemon/peer/lane.h"

#include <algorithm>
#include <array>
#include <new>
#include <span>

#include "transport/sparse_pages.h"

namespace ferry::daemon::peer {

void Lane::open() {
  if (slots_ != nullptr) return;
  std::byte* p = transport::map_sparse(kRingBytes);
  if (p == nullptr) throw std::bad_alloc();
  slots_.reset(reinterpret_cast<Slot*>(p));
}

void Lane::RingFree::operator()(Slot* p) const noexcept { transport::unmap_sparse(p, kRingBytes); }

void Lane::credits_from(std::uint32_t peer_initial, bool hello_received, std::uint32_t sent, bool pooled) noexcept {
  if (peer_credits_ != 0) return;  // told once per connection
  peer_credits_ = peer_initial;    // >= 1: decode_handshake refuses 0
  pooled_ = pooled;
  // Our initial grant on this connection was the pool's floor (the
  // handshake's initial_credits): reserved for every connection, so it is
  // lent without asking.
  release_lent();
  lent_ = pool_ != nullptr ? pool_->floor() : kNoPoolLent;
  window_ns_ = 0;
  used_now_ = used_prev_ = 0;
  // Our handshake messages on this lane (initiator: the Hello already sent;
  // acceptor: the HelloAck about to go, and with auth the Challenge before
  // it) used one of the peer's receives each.
  stats_.credits = peer_initial > sent ? peer_initial - sent : 0;
  if (hello_received) note_used(false);
}

transport::PostResult Lane::post(const transport::SendWr& wr, std::uint64_t now_ns) noexcept {
  transport::PostResult r;
  if (!has_room()) {
    r.status = Status::Busy;
    return r;
  }
  at(head_ + stats_.unconfirmed + stats_.backlog) = Slot{wr, 0, 0, false};
  const bool waits = stats_.backlog != 0;  // older WRs wait: the lane keeps its order
  ++stats_.backlog;
  if (!waits && !broken_ && (!uses_receive(wr.op) || stats_.credits > kCreditReserve)) {
    r = post_backlog(1, now_ns);
    if (r.accepted == 1) return r;
    // Refused by the transport: its send queue is full (Busy), or the
    // connection is closing under us (its Closed or failed WRs break the
    // lane soon). Either way the WR waits in the backlog like one without a
    // credit: the next flush (tick, grant, rebuilt lane) posts it, and a
    // refusal for good there breaks the lane. The caller's op stays whole.
  }
  ++stats_.credit_stalls;
  bump(counters_->credit_stalls);
  r.accepted = 1;
  r.status = Status::Ok;
  return r;
}

transport::PostResult Lane::post_backlog(std::uint32_t n, std::uint64_t now_ns) noexcept {
  std::array<transport::SendWr, transport::kPostBatch> batch;
  if (n > batch.size()) n = static_cast<std::uint32_t>(batch.size());
  // Owed grants ride on the first Send; no other header may carry one (a
  // header copied from a received message would grant the peer's number).
  std::uint32_t carrier = n;
  std::uint32_t seq = tx_seq_;
  const std::uint32_t first = head_ + stats_.unconfirmed;
  for (std::uint32_t k = 0; k < n; ++k) {
    transport::SendWr& w = at(first + k).wr;
    w.conn = conn_;
    if (peer_rail_ < w.remote_rail_rkey.size() && w.remote_rail_rkey[peer_rail_] != 0 &&
        w.remote_rail_rkey[peer_rail_] != w.remote.rkey &&
        (w.op == transport::WrOp::RdmaRead || w.op == transport::WrOp::RdmaWriteImm)) {
      // The exposing peer's key on the rail this connection reaches differs
      // from the one the WR had (the request's lane was on another rail).
      w.remote.rkey = w.remote_rail_rkey[peer_rail_];
      bump(counters_->rail_keys_used);
    }
    if (w.op == transport::WrOp::Send) {
      w.header.credit = 0;
      if (carrier == n && stats_.credits_owed != 0) {
        carrier = k;
        w.header.credit = stats_.credits_owed;
      }
      w.header.ack = rx_seq_;
    }
    w.header.lane_seq = uses_receive(w.op) ? ++seq : 0;
    batch[k] = w;
  }
  const transport::PostResult r = transport_->post_send(std::span<const transport::SendWr>(batch.data(), n));
  if (carrier < r.accepted) {
    stats_.credits_owed = 0;
    owed_by_credit_ = 0;
  }
  for (std::uint32_t k = 0; k < r.accepted; ++k) {
    if (batch[k].op == transport::WrOp::Send) note_ack_sent();
  }
  for (std::uint32_t k = 0; k < r.accepted; ++k) {
    Slot& s = at(first + k);
    s.seq = batch[k].header.lane_seq;
    s.posted_ns = now_ns;
    s.done = false;
    if (uses_receive(batch[k].op)) {
      --stats_.credits;
      tx_seq_ = s.seq;
    }
    ++stats_.tx_msgs;
    stats_.tx_bytes += wire::kHeaderBytes + batch[k].payload_len;
  }
  stats_.unconfirmed += r.accepted;
  stats_.backlog -= r.accepted;
  return r;
}

Flush Lane::flush(std::uint64_t now_ns) noexcept {
  while (stats_.backlog != 0 && is_open() && !broken_ && joined_) {
    std::uint32_t n = 0;
    std::uint32_t credits = stats_.credits;
    const std::uint32_t first = head_ + stats_.unconfirmed;
    while (n < transport::kPostBatch && n < stats_.backlog) {
      if (uses_receive(at(first + n).wr.op)) {
        if (credits <= kCreditReserve) break;
        --credits;
      }
      ++n;
    }
    if (n == 0) return Flush::Done;  // waits for more credits
    const transport::PostResult r = post_backlog(n, now_ns);
    if (r.accepted == n) continue;
    // Busy: the send queue is full, the next tick retries. Anything else:
    // the connection is closing under us; its WRs are kept for a rebuilt one.
    return r.status == Status::Busy ? Flush::Busy : Flush::Refused;
  }
  return Flush::Done;
}

bool Lane::on_received(bool is_credit, std::uint32_t grant) noexcept {
  note_used(is_credit);
  if (grant == 0) return true;
  if (peer_credits_ == 0) return false;
  if (pooled_) {
    // A pooled peer lends beyond what we used, up to its share; no share is
    // larger than any initial grant may be.
    if (grant > wire::kMaxInitialCredits - stats_.credits) return false;
  } else if (grant > peer_credits_ - stats_.credits) {
    // credits + what we used and were not granted back == peer_credits, so
    // a larger grant returns receives we never used: the peer miscounts.
    return false;
  }
  stats_.credits += grant;
  return true;
}

std::uint32_t Lane::target_lent(std::uint64_t now_ns, std::uint32_t used) noexcept {
  const std::uint32_t floor = pool_->floor();
  // A peer without a pool may only ever hold our initial grant.
  if (!pooled_) return floor;
  if (now_ns - window_ns_ >= kDemandWindowNs) {
    used_prev_ = now_ns - window_ns_ < 2 * kDemandWindowNs ? used_now_ : 0;
    used_now_ = 0;
    window_ns_ = now_ns;
  }
  used_now_ += used;
  // Twice the recent use, so a steady sender never waits for the grant
  // loop; an idle one drifts back to its floor.
  const std::uint64_t demand = std::max(used_now_, used_prev_);
  const std::uint64_t want = std::uint64_t{floor} + 2 * demand;
  return want < pool_->share() ? static_cast<std::uint32_t>(want) : pool_->share();
}

bool Lane::reposted(std::uint64_t now_ns) noexcept {
  if (recv_unposted_ == 0) return false;
  const std::uint32_t used = recv_unposted_;
  const std::uint32_t by_credit = unposted_by_credit_;
  recv_unposted_ = unposted_by_credit_ = 0;
  std::uint32_t grant = used;
  if (pool_ != nullptr) {
    // The used receives are posted again: they leave what we lend, then the
    // pool decides what goes back to the peer.
    const std::uint32_t before = lent_;
    lent_ = lent_ > used ? lent_ - used : 0;
    pool_->give_back(before, lent_);
    const std::uint32_t target = target_lent(now_ns, used);
    grant = target > lent_ ? pool_->take(lent_, target - lent_) : 0;
    lent_ += grant;
  }
  if (grant == 0) return false;
  stats_.credits_owed += grant;
  owed_by_credit_ += std::min(grant, by_credit);
  return true;
}

bool Lane::ack_overdue() noexcept {
  if (rx_seq_ == ack_sent_) return ack_waiting_ = false;
  const bool overdue = ack_waiting_;
  ack_waiting_ = true;
  return overdue;
}

bool Lane::post_credit() noexcept {
  // The reserve credit exists for this message: a Credit may use the last one.
  if (stats_.credits_owed == 0 && rx_seq_ == ack_sent_) return false;
  if (stats_.credits == 0 || conn_ == transport::kInvalidConn) return false;
  transport::SendWr wr;
  wr.conn = conn_;
  wr.header.type = wire::MsgType::Credit;
  wr.header.credit = stats_.credits_owed;
  wr.header.ack = rx_seq_;
  wr.header.lane_seq = 0;
  wr.signaled = false;
  const transport::PostResult r = transport_->post_send(std::span<const transport::SendWr>(&wr, 1));
  if (r.accepted != 1) return false;
  stats_.credits_owed = 0;
  owed_by_credit_ = 0;
  note_ack_sent();
  --stats_.credits;
  ++stats_.tx_msgs;
  stats_.tx_bytes += wire::kHeaderBytes;
  return true;
}

RxOrder Lane::accept_seq(std::uint32_t got) noexcept {
  const std::uint32_t expect = rx_seq_ + 1;
  if (got == expect) {
    rx_seq_ = got;
    return RxOrder::Next;
  }
  return seq_before(got, expect) ? RxOrder::Duplicate : RxOrder::Gap;
}

void Lane::break_conn(std::uint64_t now_ns, std::uint64_t redial_ns) noexcept {
  conn_ = transport::kInvalidConn;
  joined_ = false;
  broken_ = true;
  broken_ns_ = now_ns;
  redial_ns_ = redial_ns;
  // Receives and credits belong to a connection: a new one starts afresh.
  // Its QP is gone (the caller closed it first), so no message can use
  // what we lent on it any more.
  release_lent();
  pooled_ = false;
  peer_credits_ = 0;
  stats_.credits = 0;
  stats_.credits_owed = 0;
  owed_by_credit_ = 0;
  recv_unposted_ = 0;
  unposted_by_credit_ = 0;
}

LaneStats Lane::snapshot() const noexcept {
  LaneStats s = stats_;
  s.tx_seq = tx_seq_;
  s.rx_seq = rx_seq_;
  s.acked = acked_;
  return s;
}

}  // namespace ferry::daemon::peer
