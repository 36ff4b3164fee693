// RdmaTransport datapath: post_send (WRs chained per connection, one
// ibv_post_send per chain) and poll (lazy receive repost, batched
// ibv_poll_cq, SendDone/Accepted/Closed reports). No allocation, no locks,
// no exceptions; logging only on failure paths.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "transport/rdma/rdma_transport.h"

namespace ferry::transport::rdma {

static_assert(wire::kHeaderBytes + kMaxPrefixBytes <= kHeadSlotBytes, "a head slot holds header and prefix");

bool RdmaTransport::fill_wr(RdmaConnection& c, std::uint32_t slot, const SendWr& in, ibv_send_wr& wr, ibv_sge* sge,
                            Status& why) noexcept {
  const std::uint32_t idx = c.sq_tail;
  std::byte* s = send_slot(slot, idx);
  const std::uint32_t len = in.payload_len;
  why = Status::BadRequest;
  if (len != 0 && in.payload == nullptr) return false;
  std::uint32_t bounce = kNoBounce;  // taken last: nothing below fails after it
  wr = ibv_send_wr{};
  wr.wr_id = WrId{slot, c.generation, idx, false}.encode();
  wr.sg_list = sge;
  const auto addr = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  switch (in.op) {
    case WrOp::Send: {
      const std::uint32_t pre = in.prefix_len;
      if (pre > kMaxPrefixBytes || std::size_t{pre} + len > config_.max_eager_bytes) return false;
      wire::Header h = in.header;
      h.payload_len = pre + len;
      wire::encode_header(h, std::span<std::byte, wire::kHeaderBytes>(s, wire::kHeaderBytes));
      // The prefix joins the header in the send slot: the first SGE covers both.
      if (pre != 0) std::memcpy(s + wire::kHeaderBytes, in.prefix.data(), pre);
      const std::size_t head = wire::kHeaderBytes + pre;
      const std::size_t total = head + len;
      wr.opcode = IBV_WR_SEND;
      sge[0] = ibv_sge{addr(s), static_cast<std::uint32_t>(head), send_slab_.lkey()};
      wr.num_sge = 1;
      if (total <= qps_.max_inline()) {
        // The NIC copies at post time: no key needed, slot free at once.
        wr.send_flags |= IBV_SEND_INLINE;
        if (len != 0) sge[wr.num_sge++] = ibv_sge{addr(in.payload), len, 0};
        if constexpr (FERRY_DATAPATH_STATS) ++stats_.wrs_inline;
      } else if (in.local.lkey != 0) {
        sge[wr.num_sge++] = ibv_sge{addr(in.payload), len, in.local.lkey};
      } else {
        // The NIC reads it after we return: copy it to a shared bounce slot.
        bounce = take_bounce();
        if (bounce == kNoBounce) {
          why = Status::Busy;
          return false;
        }
        std::memcpy(bounce_slot(bounce), in.payload, len);
        sge[wr.num_sge++] = ibv_sge{addr(bounce_slot(bounce)), len, bounce_slab_.lkey()};
        if constexpr (FERRY_DATAPATH_STATS) ++stats_.bounce_copies;
      }
      break;
    }
    case WrOp::RdmaWrite:
    case WrOp::RdmaWriteImm: {
      if (in.remote.rkey == 0 || len > in.remote.length) return false;
      wr.opcode = in.op == WrOp::RdmaWrite ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM;
      // The peer sees the low 32 bits of the token (rdma_transport.h).
      if (in.op == WrOp::RdmaWriteImm) wr.imm_data = htonl(static_cast<std::uint32_t>(in.header.token));
      wr.wr.rdma.remote_addr = in.remote.addr;
      wr.wr.rdma.rkey = in.remote.rkey;
      if (len == 0) {
        wr.num_sge = 0;
      } else if (len <= qps_.max_inline()) {
        wr.send_flags |= IBV_SEND_INLINE;
        sge[0] = ibv_sge{addr(in.payload), len, 0};
        wr.num_sge = 1;
      } else if (in.local.lkey != 0) {
        sge[0] = ibv_sge{addr(in.payload), len, in.local.lkey};
        wr.num_sge = 1;
      } else if (len <= config_.slot_bytes()) {
        bounce = take_bounce();
        if (bounce == kNoBounce) {
          why = Status::Busy;
          return false;
        }
        std::memcpy(bounce_slot(bounce), in.payload, len);
        sge[0] = ibv_sge{addr(bounce_slot(bounce)), len, bounce_slab_.lkey()};
        wr.num_sge = 1;
        if constexpr (FERRY_DATAPATH_STATS) ++stats_.bounce_copies;
      } else {
        return false;  // large and unregistered
      }
      break;
    }
    case WrOp::RdmaRead: {
      if (in.remote.rkey == 0 || in.local.lkey == 0 || len == 0 || len > in.remote.length) return false;
      wr.opcode = IBV_WR_RDMA_READ;
      wr.wr.rdma.remote_addr = in.remote.addr;
      wr.wr.rdma.rkey = in.remote.rkey;
      sge[0] = ibv_sge{addr(in.payload), len, in.local.lkey};
      wr.num_sge = 1;
      break;
    }
    default: why = Status::NotSupported; return false;
  }
  // Selective signalling: the owner's signaled WRs, plus every Nth so the
  // ring's entries (and bounce slots) are reclaimed.
  if (in.signaled || ++c.unsignaled >= config_.signal_every) {
    wr.send_flags |= IBV_SEND_SIGNALED;
    c.unsignaled = 0;
    if constexpr (FERRY_DATAPATH_STATS) ++stats_.wrs_signaled;
  }
  c.sq_at(idx) = SendEntry{in.user_data, in.signaled, bounce};
  ++c.sq_tail;
  return true;
}

PostResult RdmaTransport::post_send(std::span<const SendWr> wrs) noexcept {
  owner_.check();
  PostResult r;
  RdmaConnection* chain = nullptr;  // the connection whose WRs wr_[0, n) are
  std::size_t n = 0;
  // Posts the chain; on failure rolls back what the NIC did not take.
  auto flush = [&]() -> bool {
    if (n == 0) return true;
    wr_[n - 1].next = nullptr;
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(chain->qp, wr_.data(), &bad);
    if constexpr (FERRY_DATAPATH_STATS) ++stats_.post_send_calls;
    std::size_t taken = n;
    if (rc != 0) taken = bad == nullptr ? 0 : static_cast<std::size_t>(bad - wr_.data());
    if constexpr (FERRY_DATAPATH_STATS) stats_.wrs_posted += taken;
    for (std::size_t k = taken; k < n; ++k) put_bounce(chain->sq_at(chain->sq_tail - (n - k)).bounce);
    chain->sq_tail -= static_cast<std::uint32_t>(n - taken);
    r.accepted -= static_cast<std::uint32_t>(n - taken);
    n = 0;
    return rc == 0;
  };
  for (const SendWr& in : wrs) {
    RdmaConnection* c = conns_.lookup(in.conn);
    if (c == nullptr || c->state != ConnState::Open) {
      r.status = Status::EndpointClosed;
      break;
    }
    if (c != chain || n == kPostBatch) {
      if (!flush()) {
        r.status = Status::Busy;
        return r;
      }
      chain = c;
    }
    if (c->sq_used() >= qps_.sq_depth()) {
      r.status = Status::Busy;
      break;
    }
    Status why = Status::Ok;
    if (!fill_wr(*c, ConnectionTable::slot_of(in.conn), in, wr_[n], &sge_[2 * n], why)) {
      r.status = why;
      break;
    }
    if (n > 0) wr_[n - 1].next = &wr_[n];
    ++n;
    ++r.accepted;
  }
  if (!flush()) r.status = Status::Busy;
  // One predictable branch when no test armed a fault (rdma_fault.h).
  if (fault_.armed()) [[unlikely]]
    fault_.inject(conns_, wrs.first(r.accepted));
  return r;
}

void RdmaTransport::repost_consumed() noexcept {
  if (repost_count_ == 0) return;
  // One ibv_post_srq_recv for everything the last poll handed out. A
  // receive belongs to the pool, not to a QP: it goes back whatever became
  // of the connection that used it.
  const auto len = static_cast<std::uint32_t>(wire::kHeaderBytes + config_.max_eager_bytes);
  for (std::size_t n = 0; n < repost_count_; ++n) {
    recv_sge_[n] = ibv_sge{reinterpret_cast<std::uintptr_t>(recv_slot(repost_[n])), len, recv_slab_.lkey()};
    recv_wr_[n] = ibv_recv_wr{};
    recv_wr_[n].wr_id = WrId{0, 0, repost_[n], true}.encode();
    recv_wr_[n].sg_list = &recv_sge_[n];
    recv_wr_[n].num_sge = 1;
    recv_wr_[n].next = n + 1 < repost_count_ ? &recv_wr_[n + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  if (ibv_post_srq_recv(srq_, recv_wr_.data(), &bad) != 0) {
    // Only a broken device refuses: the pool shrinks by what it did not
    // take, and the counters say so.
    const std::size_t taken = bad == nullptr ? 0 : static_cast<std::size_t>(bad - recv_wr_.data());
    stats_.recv_repost_failures += repost_count_ - taken;
    spdlog::error("rdma: reposting {} receives to the shared queue failed", repost_count_ - taken);
  }
  repost_count_ = 0;
}

std::size_t RdmaTransport::poll_cq(std::span<Completion> out) noexcept {
  std::size_t room = std::min(out.size(), kRepostCapacity - repost_count_);
  // A passive connection's first CQE may arrive before ESTABLISHED: its
  // Accepted is then reported here, ahead of the Recv, so keep room for it.
  if (conns_.accepting > 0) room /= 2;
  if (room == 0) return 0;
  const int got = ibv_poll_cq(cq_, static_cast<int>(std::min(room, kPollBatch)), wc_.data());
  if constexpr (FERRY_DATAPATH_STATS) {
    ++stats_.cq_polls;
    if (got <= 0) ++stats_.cq_polls_empty;
  }
  std::size_t n = 0;
  for (int k = 0; k < got; ++k) {
    const ibv_wc& wc = wc_[k];
    WrId w = WrId::decode(wc.wr_id);
    if (w.recv) {
      // A pool receive: back to the SRQ at the next poll, whatever its
      // status or connection. Its connection is its QP's.
      if (w.index >= config_.pool_receives()) continue;
      repost_[repost_count_++] = w.index;
      w.slot = conns_.qps.find(wc.qp_num);
      if (w.slot == QpIndex::kNone) continue;  // its QP is gone already
      w.generation = conns_[w.slot].generation;
    }
    if (w.slot >= config_.max_connections) continue;
    // Counted whatever the connection's state: an RNR or retry failure of a
    // WR on a QP already draining, accepting or torn down is still one of
    // ferry's QPs overrunning a peer (or losing it), and the counters are
    // what tests judge "no RNR" by.
    if (wc.status == IBV_WC_RNR_RETRY_EXC_ERR)
      ++stats_.rnr_retry_exceeded;
    else if (wc.status == IBV_WC_RETRY_EXC_ERR)
      ++stats_.retry_exceeded;
    else if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR)
      ++stats_.wc_errors;
    RdmaConnection& c = conns_[w.slot];
    if (c.generation != w.generation) continue;  // a CQE of a QP already torn down
    if (c.state == ConnState::Accepting && wc.status == IBV_WC_SUCCESS) {
      --conns_.accepting;
      c.state = ConnState::Open;
      Completion& a = out[n++];
      a = Completion{};
      a.kind = CompletionKind::Accepted;
      a.conn = conns_.id_of(w.slot);
    }
    if (c.state != ConnState::Open) continue;
    if (wc.status != IBV_WC_SUCCESS) {
      spdlog::warn("rdma: connection {} QP {}: {} completion failed: {} (vendor error {})", w.slot, wc.qp_num,
                   w.recv ? "receive" : "send", ibv_wc_status_str(wc.status), wc.vendor_err);
      conns_.begin_drain(w.slot, Status::PeerReset, Status::PeerReset);
      continue;
    }
    if (!w.recv) {
      // Signaled CQEs cover every earlier WR of the QP (in-order completion).
      c.sq_done += ((w.index - c.sq_done) & 0x7FFFFFFFu) + 1;
      conns_.flag(w.slot);
      continue;
    }
    if constexpr (FERRY_DATAPATH_STATS) ++stats_.recvs;
    // Its first message: no first-message deadline any more (one predictable
    // branch while no accepted connection is silent).
    if (conns_.guard.any_silent()) [[unlikely]]
      conns_.guard.spoke(w.slot);
    Completion& r = out[n];
    r = Completion{};
    r.kind = CompletionKind::Recv;
    r.conn = conns_.id_of(w.slot);
    const std::byte* slot = recv_slot(w.index);
    if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      r.header.type = wire::MsgType::WriteDone;
      r.header.token = ntohl(wc.imm_data);
      r.header.aux = wc.byte_len;
      ++n;
      continue;
    }
    if (wire::decode_header(std::span<const std::byte>(slot, wc.byte_len), config_.max_eager_bytes, r.header) !=
            wire::WireError::None ||
        wire::kHeaderBytes + r.header.payload_len != wc.byte_len) {
      ++stats_.protocol_errors;
      spdlog::warn("rdma: connection {}: malformed message ({} bytes); closing", w.slot, wc.byte_len);
      conns_.begin_drain(w.slot, Status::PeerReset, Status::ProtocolError);
      continue;
    }
    r.payload = slot + wire::kHeaderBytes;
    ++n;
  }
  return n;
}

std::size_t RdmaTransport::report(std::uint32_t slot, std::span<Completion> out) noexcept {
  RdmaConnection& c = conns_[slot];
  std::size_t n = 0;
  auto emit = [&](CompletionKind kind, Status st, std::uint64_t user_data) {
    Completion& x = out[n++];
    x = Completion{};
    x.kind = kind;
    x.status = st;
    x.conn = conns_.id_of(slot);
    x.user_data = user_data;
  };
  if (c.report_accepted && n < out.size()) {
    emit(CompletionKind::Accepted, Status::Ok, 0);
    c.report_accepted = false;
  }
  if (c.report_connected && n < out.size()) {
    emit(CompletionKind::Connected, Status::Ok, 0);
    c.report_connected = false;
  }
  for (; c.sq_head != c.sq_done && n < out.size(); ++c.sq_head) {
    SendEntry& e = c.sq_at(c.sq_head);
    put_bounce(e.bounce);
    if (e.user_signaled) emit(CompletionKind::SendDone, Status::Ok, e.user_data);
  }
  if (c.state == ConnState::Draining) {
    // Failures always complete, signaled or not.
    for (; c.sq_head != c.sq_tail && n < out.size(); ++c.sq_head) {
      put_bounce(c.sq_at(c.sq_head).bounce);
      emit(CompletionKind::SendDone, c.wr_status, c.sq_at(c.sq_head).user_data);
    }
    if (c.sq_head == c.sq_tail && n < out.size()) {
      emit(CompletionKind::Closed, c.closed_status, 0);
      conns_.free_slot(slot);
      return n;
    }
  }
  if (!c.report_accepted && !c.report_connected && c.sq_head == c.sq_done && c.state != ConnState::Draining) {
    conns_.attention.clear(slot);
  }
  return n;
}

std::size_t RdmaTransport::report_all(std::span<Completion> out) noexcept {
  std::size_t n = 0;
  const std::uint32_t max = config_.max_connections;
  // Set bits only, from next_slot_ round to it (fairness).
  const auto sweep = [&](std::uint32_t lo, std::uint32_t hi) {
    for (std::uint32_t s = conns_.attention.next(lo); s < hi && n < out.size(); s = conns_.attention.next(s + 1))
      n += report(s, out.subspan(n));
  };
  if (conns_.attention.any()) {
    sweep(next_slot_, max);
    sweep(0, next_slot_);
  }
  next_slot_ = (next_slot_ + 1) % max;
  return n;
}

// Drains the completion channel and arms the CQ for the next event. True
// when it armed (a CQE may have landed before the arm), false when the CQ
// was armed already and nothing fired since.
bool RdmaTransport::rearm_cq() noexcept {
  bool fired = false;
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  while (ibv_get_cq_event(comp_channel_, &ev_cq, &ev_ctx) == 0) {
    ibv_ack_cq_events(ev_cq, 1);
    fired = true;
  }
  if (!fired && cq_armed_) return false;
  ibv_req_notify_cq(cq_, 0);
  cq_armed_ = true;
  return true;  // a CQE may have landed before the arm: poll once more
}

std::size_t RdmaTransport::poll(std::span<Completion> out) noexcept {
  owner_.check();
  // The previous poll's Recv payloads expire now: give their slots back.
  repost_consumed();
  std::size_t n = report_all(out);
  n += poll_cq(out.subspan(n));
  const bool slow = slow_due_ || conns_.connecting > 0 || conns_.accepting > 0 || ++polls_ % kSlowPollEvery == 0;
  if (n < out.size() && slow) {
    // Idle enough, and due, to look at the slow sources.
    slow_due_ = false;
    stats_.async_events += events_.handle(conns_);
    connector_.handle_events();
    if (conns_.connecting > 0) connector_.expire_connects();
    connector_.expire_silent();
    if (events_.has_parked()) events_.release_parked_ids();
    // An ESTABLISHED just handled owes an Accepted: it must reach the owner
    // before the connection's first Recv (its Hello), which the CQ may
    // already hold; the owner drops a message on a connection it has not
    // heard of (seen under TCG: the peer's lane handshake then stalled).
    n += report_all(out.subspan(n));
  }
  return n;
}

bool RdmaTransport::prepare_to_sleep() noexcept {
  owner_.check();
  slow_due_ = true;
  // Arming may race a CQE that landed since the last poll: the owner polls
  // once more before it sleeps (then the CQ is armed and quiet: sleep).
  return !rearm_cq();
}

}  // namespace ferry::transport::rdma
