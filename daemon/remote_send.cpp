// Our clients' Send/Call on remote endpoints, their answers, Close and
// detach.
//
// Three shapes, chosen per op:
//   eager        header + payload in one message (tcp always; rdma up to the
//                eager threshold), the payload SGE straight from the
//                client's registered tx arena (zero_copy.cpp);
//   + response   rdma Call: a RemoteBuffer naming the caller's response
//     buffer     buffer rides in front of the payload (SendWr prefix); the
//                serving daemon RDMA-WRITEs the reply into it with
//                immediate, so the reply lands without a copy here;
//   rendezvous   rdma, over the eager threshold: a RendezvousReq carries the
//                source RemoteBuffer (and the response buffer) and the
//                serving daemon RDMA-READs the payload into its server's rx
//                arena (rendezvous.cpp).
// A Send completes with the peer's zero-length Response (the delivery
// outcome), a Call with its Response or WriteDone.
//
// Send windows (README "Flow control"): an op counts against its endpoint,
// its channel and the NIC from post to answer. Past any limit it parks on
// its endpoint (FIFO with the local parks, delivery-timeout-ms bound), so a
// slow service back-pressures only its own senders while others sharing the
// QPs go on. A receiver that refuses an op Busy (its client's share of
// staging is full) refuses every later op of that endpoint until the refused
// one comes again (header seq); here the refused ops wait in their order and
// go again after a backoff (1..64 ms, doubling) once every op then in flight
// has been answered (those are refused too, and must go again before any
// later op), so order holds and a stopped consumer costs the shared lanes a
// few messages per backoff instead of a stream of retries. A refused op given
// up (delivery deadline) hands its number to the next op sent.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "daemon/engine.h"
#include "daemon/mono_clock.h"
#include "transport/wire/remote_buffer.h"

namespace ferry::daemon {

namespace {

void put_buffer(transport::SendWr& wr, const wire::RemoteBuffer& rb) noexcept {
  encode_remote_buffer(
      rb, std::span<std::byte, wire::kRemoteBufferBytes>(wr.prefix.data() + wr.prefix_len, wire::kRemoteBufferBytes));
  wr.prefix_len = static_cast<std::uint8_t>(wr.prefix_len + wire::kRemoteBufferBytes);
}

}  // namespace

void Engine::op_send_or_call_remote(ClientSession& c, Endpoint& ep, const shm::SqEntry& e) {
  Status failure = Status::Ok;
  switch (try_send_remote(c, ep, e, &failure, 0, 0)) {
    case Delivery::Done: break;
    case Delivery::Blocked: park(c, ep, e); break;
    case Delivery::Failed: complete(c, static_cast<shm::Op>(e.op), e.user_data, failure); break;
  }
}

bool Engine::window_open(const peer::Channel& ch, const Endpoint& ep, std::uint32_t bytes) const noexcept {
  // One op always fits an empty window, however large: a window smaller
  // than a message must slow it down, not refuse it.
  if (config_.endpoint_window_ops != 0 && ep.inflight >= config_.endpoint_window_ops) return false;
  if (config_.channel_window_ops != 0 && ch.window_ops >= config_.channel_window_ops) return false;
  if (config_.channel_window_bytes != 0 && ch.window_ops != 0 && ch.window_bytes + bytes > config_.channel_window_bytes)
    return false;
  if (config_.nic_window_bytes != 0 && nic_window_ops_ != 0 && nic_window_bytes_ + bytes > config_.nic_window_bytes)
    return false;
  return true;
}

void Engine::count_stall(peer::Channel& ch, Endpoint& ep) noexcept {
  if (ep.stall_counted) return;  // retries of a parked op are not new stalls
  ep.stall_counted = true;
  ++ch.window_stalls;
  bump(counters_.window_stalls);
}

Engine::Delivery Engine::try_send_remote(ClientSession& c, Endpoint& ep, const shm::SqEntry& e, Status* failure,
                                         std::uint64_t seq, std::uint64_t deadline_ns) {
  const auto op = static_cast<shm::Op>(e.op);
  peer::Channel* ch = ep.peer_dead ? nullptr : peers_->find(ep.channel);
  if (ch == nullptr || !ch->usable()) {
    *failure = Status::PeerReset;
    return Delivery::Failed;
  }
  const bool is_call = op == shm::Op::Call;
  // rdma with a registered segment: response buffer and rendezvous.
  const bool rdma = c.mr.valid() && rdma_pd_ != nullptr;
  const bool resp_buffer = rdma && is_call && e.resp_length != 0;
  const std::uint32_t prefix = resp_buffer ? wire::kRemoteBufferBytes : 0;
  const bool rendezvous = rdma && e.length + prefix > lane_max_message_;
  if (e.length + prefix > lane_max_message_ && !rendezvous) {
    *failure = Status::BadRequest;  // over max-message-bytes on tcp lanes: the client library checks it first
    return Delivery::Failed;
  }
  const std::uint64_t now = now_ns();
  if (now < ep.paused_until_ns) return Delivery::Blocked;  // backing off after a Busy
  if (ep.resend_wait) {
    if (ep.inflight != 0) return Delivery::Blocked;  // answers still coming: they may be refusals too
    ep.resend_wait = false;
  }
  if (!window_open(*ch, ep, e.length)) {
    count_stall(*ch, ep);
    return Delivery::Blocked;
  }
  // What the post below needs besides keys (a tracking slot for a payload
  // from the arena, room in the lane's ring) is checked before any memory
  // window is opened: an op held back by them binds nothing per retry.
  if (!rendezvous && e.length != 0 && !zc_available()) return Delivery::Blocked;
  if (!peers_->has_room(*ch, ep.id)) {
    count_stall(*ch, ep);
    return Delivery::Blocked;
  }

  peer::RemoteOp rop;
  rop.kind = is_call ? peer::RemoteOpKind::Call : peer::RemoteOpKind::Send;
  rop.client = c.id();
  rop.endpoint = ep.id;
  rop.channel = ch->id;
  rop.lane = ep.id;
  rop.user_data = e.user_data;
  rop.resp_offset = e.resp_offset;
  rop.resp_length = e.resp_length;
  rop.bytes = e.length;
  rop.exposed = rendezvous || resp_buffer;
  rop.resp_buffer = resp_buffer;
  rop.entry = e;
  // The number the peer expects next if we gave a refused op up, else the
  // op's own (a resend) or a new one.
  // (Only when lower than the op's own: an earlier refused op still waiting
  // here goes with its own number first.)
  const bool resync = ep.resync_seq != 0 && (seq == 0 || ep.resync_seq < seq);
  rop.seq = resync ? ep.resync_seq : seq != 0 ? seq : ep.next_seq++;
  rop.deadline_ns = deadline_ns != 0 ? deadline_ns : now + delivery_timeout_ns_;
  const std::uint32_t timeout_ms = is_call ? call_timeout_of(e) : 0;
  // Keys for what the peer may touch, per call where windows exist.
  std::uint32_t src_rkey = c.mr.tx().rkey, resp_rkey = c.mr.tx().rkey;
  if (keys_.per_call() && (rendezvous || resp_buffer)) {
    Status k = Status::Ok;
    if (rendezvous) k = keys_.open(c.mr, c.at(e.offset), e.length, false, &rop.key_src, &src_rkey);
    if (k == Status::Ok && resp_buffer)
      k = keys_.open(c.mr, c.at(e.resp_offset), e.resp_length, true, &rop.key_resp, &resp_rkey);
    if (k != Status::Ok) {
      keys_.close(rop.key_src);
      if (k == Status::Busy) return Delivery::Blocked;  // every window open: wait like a full send window
      *failure = k;
      return Delivery::Failed;
    }
    bump(counters_.key_windows, (rop.key_src != 0) + (rop.key_resp != 0));
  }
  const std::uint32_t key_src = rop.key_src, key_resp = rop.key_resp;
  auto unkey = [&] {
    keys_.close(key_src);
    keys_.close(key_resp);
  };
  rop.answer_by_ns = answer_backstop(timeout_ms, now);
  const std::uint64_t op_seq = rop.seq;
  const std::uint64_t token = remote_ops_.insert(std::move(rop));

  transport::SendWr wr;
  wr.header.src_ep = ep.id;
  wr.header.dst_ep = ep.remote_ep;
  wr.header.token = token;
  wr.header.seq = op_seq;
  if (seq != 0 || resync) wr.header.flags |= wire::kFlagRetransmit;  // informational: sent again
  const transport::MemoryHandle mr = c.mr.tx();                      // payload and descriptors: all in the tx arena
  if (rendezvous) {
    wr.header.type = wire::MsgType::RendezvousReq;
    wr.header.aux = static_cast<std::uint8_t>(is_call ? wire::MsgType::Call : wire::MsgType::Send);
    put_buffer(wr, wire::RemoteBuffer{reinterpret_cast<std::uintptr_t>(c.at(e.offset)), src_rkey, e.length});
  } else {
    wr.header.type = is_call ? wire::MsgType::Call : wire::MsgType::Send;
    wr.payload = c.at(e.offset);
    wr.payload_len = e.length;
  }
  wire::set_call_timeout_ms(wr.header, timeout_ms);
  if (resp_buffer) {
    wr.header.flags |= wire::kFlagRespBuffer;
    put_buffer(wr, wire::RemoteBuffer{reinterpret_cast<std::uintptr_t>(c.at(e.resp_offset)), resp_rkey, e.resp_length});
  }
  // The peer's answer completes the op; a failed WR still reports
  // (on_send_done) and fails it. A payload from the client's arena goes
  // signaled and tracked (zero_copy.cpp); otherwise unsignaled, copied.
  const std::uint64_t zc = wr.payload_len != 0 ? zc_track(c, WrTag::remote_op(token)) : 0;
  if (wr.payload_len != 0 && zc == 0) {  // every tracking slot busy: wait rather than post untracked
    remote_ops_.erase(token);
    unkey();
    return Delivery::Blocked;
  }
  wr.user_data = zc != 0 ? zc : WrTag::remote_op(token);
  wr.signaled = zc != 0;
  if (zc != 0 && rdma) wr.local = mr;
  const auto r = peers_->post(*ch, ep.id, wr);
  if (r.accepted != 1) {
    if (zc != 0) zc_done(zc);
    remote_ops_.erase(token);
    unkey();
    if (r.status == Status::Busy) {  // the lane's ring filled after all: wait like a full window
      count_stall(*ch, ep);
      return Delivery::Blocked;
    }
    *failure = Status::PeerReset;
    return Delivery::Failed;
  }
  ++ch->lanes[ep.id % ch->lane_count].stats.inflight;
  ++ch->window_ops;
  ch->window_bytes += e.length;
  ++nic_window_ops_;
  nic_window_bytes_ += e.length;
  ++ep.inflight;
  if (resync) ep.resync_seq = 0;
  if (rendezvous || resp_buffer) ++c.remote_holds;
  if (rendezvous) bump(counters_.rendezvous_sends);
  bump(is_call ? counters_.remote_calls : counters_.remote_sends);
  return Delivery::Done;
}

void Engine::finish_remote_op(const peer::RemoteOp& op) noexcept {
  if (peer::Channel* ch = peers_->find(op.channel)) {
    peer::LaneStats& st = ch->lanes[op.lane % std::max<std::uint32_t>(ch->lane_count, 1)].stats;
    if (st.inflight != 0) --st.inflight;
    if (ch->window_ops != 0) --ch->window_ops;
    ch->window_bytes -= std::min<std::uint64_t>(ch->window_bytes, op.bytes);
  }
  if (nic_window_ops_ != 0) --nic_window_ops_;
  nic_window_bytes_ -= std::min<std::uint64_t>(nic_window_bytes_, op.bytes);
  if (ClientSession* c = client(op.client)) {
    if (auto it = c->endpoints.find(op.endpoint); it != c->endpoints.end() && it->second.inflight != 0)
      --it->second.inflight;
  }
  // The peer has answered (or the channel is gone): its keys die before the
  // memory goes back to the client or the session's MR is deregistered.
  keys_.close(op.key_src);
  keys_.close(op.key_resp);
  if (op.exposed) release_hold(op.client);
}

void Engine::on_response(peer::Channel& ch, const wire::Header& h, const std::byte* payload) {
  peer::RemoteOp* found = remote_ops_.find(h.token);
  if (found == nullptr || found->channel != ch.id ||
      (found->kind != peer::RemoteOpKind::Send && found->kind != peer::RemoteOpKind::Call)) {
    return;  // late (op already failed or cancelled) or forged
  }
  const peer::RemoteOp op = *found;
  remote_ops_.erase(h.token);
  finish_remote_op(op);
  ClientSession* c = client(op.client);
  if (c == nullptr) return;
  const shm::Op kind = op.kind == peer::RemoteOpKind::Send ? shm::Op::Send : shm::Op::Call;
  if (op.cancelled) {
    complete(*c, kind, op.user_data, Status::Cancelled);
    return;
  }
  auto ep = c->endpoints.find(op.endpoint);
  if (ep != c->endpoints.end()) {
    if (h.status == Status::Busy && !ep->second.peer_dead) {
      // The receiver is full: hold the op here and send it again after a
      // backoff, until its delivery deadline (then Timeout).
      const std::uint64_t now = now_ns();
      if (now < op.deadline_ns) {
        repark_refused(*c, ep->second, op, now);
        return;
      }
      bump(counters_.timeouts);
      if (ep->second.resync_seq == 0 || op.seq < ep->second.resync_seq)
        ep->second.resync_seq = op.seq;  // still awaited
      complete(*c, kind, op.user_data, Status::Timeout);
      return;
    }
    ep->second.backoff_ns = 0;
  }
  if (kind == shm::Op::Send || h.status != Status::Ok) {
    complete(*c, kind, op.user_data, h.status, 0, h.status == Status::ResponseTooLarge ? h.aux : 0);
    return;
  }
  if (h.payload_len > op.resp_length) {
    complete(*c, shm::Op::Call, op.user_data, Status::ResponseTooLarge, 0, h.payload_len);
    return;
  }
  if (h.payload_len != 0) {
    std::memcpy(c->at(op.resp_offset), payload, h.payload_len);
    bump(counters_.bytes_copied, h.payload_len);
  }
  bump(counters_.replies);
  complete(*c, shm::Op::Call, op.user_data, Status::Ok, 0, h.payload_len);
}

void Engine::repark_refused(ClientSession& c, Endpoint& ep, const peer::RemoteOp& op, std::uint64_t now_ns) {
  constexpr std::uint64_t kMinBackoffNs = 1'000'000, kMaxBackoffNs = 64'000'000;
  ep.backoff_ns = std::clamp(ep.backoff_ns * 2, kMinBackoffNs, kMaxBackoffNs);
  ep.paused_until_ns = now_ns + ep.backoff_ns;
  ep.resend_wait = true;
  // Refused ops go back in their first-send order, ahead of ops never sent.
  auto at =
      std::find_if(ep.parked.begin(), ep.parked.end(), [&](const Parked& p) { return p.seq == 0 || p.seq > op.seq; });
  ep.parked.insert(at, Parked{op.entry, op.deadline_ns, op.seq});
  bump(counters_.busy_backoffs);
  if (!ep.in_retry_list) {
    ep.in_retry_list = true;
    parked_endpoints_.push_back(EndpointRef{c.id(), ep.id});
  }
}

void Engine::on_write_done(peer::Channel& ch, const wire::Header& h) {
  // The reply is already in the caller's response buffer: no copy here.
  std::uint64_t token = 0;
  peer::RemoteOp* found = remote_ops_.find_slot(static_cast<std::uint32_t>(h.token), &token);
  if (found == nullptr || found->channel != ch.id || found->kind != peer::RemoteOpKind::Call || !found->resp_buffer) {
    spdlog::warn("channel {}: WRITE with immediate {} names no call waiting for one; ignored", ch.id, h.token);
    return;
  }
  const peer::RemoteOp op = *found;
  remote_ops_.erase(token);
  finish_remote_op(op);
  ClientSession* c = client(op.client);
  if (c == nullptr) return;
  if (op.cancelled) {
    complete(*c, shm::Op::Call, op.user_data, Status::Cancelled);
    return;
  }
  // The NIC wrote h.aux bytes; more than the buffer means a peer that
  // ignored the descriptor's length: report it rather than trust it.
  if (h.aux > op.resp_length) {
    spdlog::warn("channel {}: peer wrote {} bytes into a {}-byte response buffer", ch.id, h.aux, op.resp_length);
    complete(*c, shm::Op::Call, op.user_data, Status::ProtocolError);
    return;
  }
  bump(counters_.replies);
  bump(counters_.zero_copy_replies);
  complete(*c, shm::Op::Call, op.user_data, Status::Ok, 0, h.aux);
}

void Engine::close_remote(ClientSession& c, Endpoint& ep) {
  // Its Sends/Calls still waiting for the peer complete Cancelled: at once,
  // or, where the peer may still READ or WRITE the client's memory, when
  // the peer answers (it answers every call of a closed proxy, on the same
  // lane, after any WRITE it posted).
  remote_ops_.sweep([&](std::uint64_t, peer::RemoteOp& op) {
    if (op.client != c.id() || op.endpoint != ep.id) return false;
    if (op.kind != peer::RemoteOpKind::Send && op.kind != peer::RemoteOpKind::Call) return false;
    if (op.exposed) {
      op.cancelled = true;
      return false;
    }
    finish_remote_op(op);
    complete(c, op.kind == peer::RemoteOpKind::Call ? shm::Op::Call : shm::Op::Send, op.user_data, Status::Cancelled);
    return true;
  });
  peer::Channel* ch = peers_->find(ep.channel);
  if (ep.peer_dead || ch == nullptr || !ch->usable()) return;
  wire::Header bye;
  bye.type = wire::MsgType::Close;
  bye.src_ep = ep.id;
  bye.dst_ep = ep.remote_ep;
  peers_->send(*ch, ep.id, bye, nullptr, 0, 0, false);
  peers_->unbind_endpoint(*ch);
}

void Engine::forget_remote_of(ClientSession& gone) {
  // Nobody to complete to: drop its remote ops (answers then find nothing)
  // except those exposing its memory, which keep the session retired until
  // answered; close its remote endpoints so peers drop their proxies.
  remote_ops_.sweep([&](std::uint64_t, peer::RemoteOp& op) {
    if (op.client != gone.id()) return false;
    if (op.exposed) {
      op.cancelled = true;
      return false;
    }
    if (op.kind == peer::RemoteOpKind::Send || op.kind == peer::RemoteOpKind::Call) finish_remote_op(op);
    return true;
  });
  for (auto& [id, ep] : gone.endpoints) {
    if (ep.channel != 0) close_remote(gone, ep);
  }
}

}  // namespace ferry::daemon
