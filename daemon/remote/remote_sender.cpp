// A Send or Call on a remote endpoint: its shape, the checks that may hold
// it back (back-off, windows, tracking slots, the lane), its keys, the WR.
#include "daemon/remote/remote_sender.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/peer/channel_manager.h"
#include "daemon/remote/wr_tag.h"
#include "transport/wire/remote_buffer.h"

namespace ferry::daemon {

namespace {

void put_buffer(transport::SendWr& wr, const wire::RemoteBuffer& rb) noexcept {
  encode_remote_buffer(
      rb, std::span<std::byte, wire::kRemoteBufferBytes>(wr.prefix.data() + wr.prefix_len, wire::kRemoteBufferBytes));
  wr.prefix_len = static_cast<std::uint8_t>(wr.prefix_len + wire::kRemoteBufferBytes);
}

}  // namespace

struct RemoteSender::Shape {
  bool is_call = false;
  bool rdma = false;         // lanes with remote access, segment registered
  bool resp_buffer = false;  // the peer WRITEs the reply into the caller's buffer
  bool rendezvous = false;   // the peer READs the payload from the caller's tx arena
  bool oversize = false;     // too large for a lane message, and no rendezvous
  bool exposed() const noexcept { return rendezvous || resp_buffer; }
};

RemoteSender::RemoteSender(const Config& config, Sessions& sessions, peer::ChannelManager& peers, Parking& parking,
                           Deadlines& deadlines, RemoteKeys& keys, Counters& counters, bool remote_access,
                           std::uint32_t lane_max_message)
    : sessions_(sessions),
      peers_(peers),
      parking_(parking),
      deadlines_(deadlines),
      keys_(keys),
      counters_(counters),
      remote_access_(remote_access),
      lane_max_message_(lane_max_message),
      eager_response_max_(std::min(config.rdma_eager_response_bytes, lane_max_message)),
      large_bytes_(config.engine_spin_bulk_bytes),
      windows_(config),
      open_retry_ns_(std::uint64_t{config.connect_timeout_ms} * 4'000'000) {
  overdue_.reserve(64);
}

RemoteSender::Shape RemoteSender::shape_of(const ClientSession& c, const Operation& op) const noexcept {
  Shape s;
  s.is_call = op.is_call();
  s.rdma = remote_access_ && c.mr.valid();
  // A small response comes back as a message (no key, no bind): a response
  // buffer is exposed only when the reply may be large.
  s.resp_buffer = s.rdma && s.is_call && op.resp_length > eager_response_max_;
  const std::uint32_t prefix = s.resp_buffer ? wire::kRemoteBufferBytes : 0;
  const bool large = op.length + prefix > lane_max_message_;
  s.rendezvous = s.rdma && large;
  s.oversize = large && !s.rendezvous;
  return s;
}

void RemoteSender::stall(std::uint32_t channel, Attempt& at) noexcept {
  if (windows_.stalled(channel, at.stall_counted)) bump(counters_.window_stalls);
}

Outcome RemoteSender::admit(peer::Channel& ch, Endpoint& ep, std::uint32_t lane, const Operation& op, Attempt& at,
                            bool zero_copy) {
  RemoteLink& r = ep.remote;
  if (r.keys_opening) return Outcome::blocked();  // an earlier op waits for its keys: keep the order
  if (deadlines_.now() < r.paused_until_ns) return Outcome::blocked();  // backing off after a Busy
  if (r.resend_wait) {
    if (r.inflight != 0) return Outcome::blocked();  // answers still coming: they may be refusals too
    r.resend_wait = false;
  }
  if (!windows_.open(ch.id, r, op.length)) {
    stall(ch.id, at);
    return Outcome::blocked();
  }
  // What the post needs besides keys (a tracking slot for a payload from
  // the arena, room in the lane's ring) is checked before any memory window
  // is opened: an op held back by them binds nothing per retry.
  if (zero_copy && !sessions_.can_track_wr()) return Outcome::blocked();
  if (!peers_.has_room(ch, lane)) {
    stall(ch.id, at);
    return Outcome::blocked();
  }
  return Outcome::done();
}

Status RemoteSender::open_keys(ClientSession& c, const Operation& op, const Shape& s, std::uint64_t token,
                               RemoteOp& rop) {
  // Without windows: the tx arena's key on the rail of the lane the request
  // goes on (the peer's READ/WRITE comes in through that lane's QP).
  rop.key_src.rkey = rop.key_resp.rkey = c.mr.tx_rkey(peers_.rail_of_lane(rop.channel, rop.lane));
  if (!keys_.per_call() || !s.exposed()) return Status::Ok;
  auto open = [&](const std::byte* addr, std::uint32_t len, bool write, RemoteKey& key, std::uint64_t which) {
    auto k = keys_.open(c.mr, addr, len, write, key_cookie(token, which));
    if (!k) return k.status;
    key = k.value;
    ++rop.opening;
    return Status::Ok;
  };
  Status k = Status::Ok;
  if (s.rendezvous) k = open(c.at(op.offset), op.length, false, rop.key_src, 0);
  if (k == Status::Ok && s.resp_buffer) k = open(c.at(op.resp_offset), op.resp_length, true, rop.key_resp, 1);
  if (k == Status::Ok) {
    bump(counters_.key_windows, (rop.key_src.slot != 0) + (rop.key_resp.slot != 0));
    bump(counters_.key_windows_read, rop.key_src.slot != 0);
    bump(counters_.key_windows_write, rop.key_resp.slot != 0);
  }
  return k;
}

transport::SendWr RemoteSender::request_wr(ClientSession& c, const Endpoint& ep, const Shape& s, std::uint64_t token,
                                           const RemoteOp& rop) const noexcept {
  const Operation& op = rop.entry;
  const std::uint32_t src_rkey = rop.key_src.rkey, resp_rkey = rop.key_resp.rkey;
  transport::SendWr wr;
  wr.header.src_ep = ep.id;
  wr.header.dst_ep = ep.remote.remote_ep;
  wr.header.token = token;
  wr.header.seq = rop.seq;
  if (rop.again) wr.header.flags |= wire::kFlagRetransmit;  // informational: sent again
  if (s.rendezvous) {
    wr.header.type = wire::MsgType::RendezvousReq;
    wr.header.aux = static_cast<std::uint8_t>(s.is_call ? wire::MsgType::Call : wire::MsgType::Send);
    put_buffer(wr, wire::RemoteBuffer{reinterpret_cast<std::uintptr_t>(c.at(op.offset)), src_rkey, op.length});
  } else {
    wr.header.type = s.is_call ? wire::MsgType::Call : wire::MsgType::Send;
    wr.payload = c.at(op.offset);
    wr.payload_len = op.length;
  }
  wire::set_call_timeout_ms(wr.header, s.is_call ? op.timeout_ms : 0);
  if (s.resp_buffer) {
    wr.header.flags |= wire::kFlagRespBuffer;
    put_buffer(wr,
               wire::RemoteBuffer{reinterpret_cast<std::uintptr_t>(c.at(op.resp_offset)), resp_rkey, op.resp_length});
  }
  return wr;
}

bool RemoteSender::announce_keys(ClientSession& c, peer::Channel& ch, std::uint32_t lane) {
  const std::uint32_t rails = peers_.rail_count();
  lane %= ch.lane_count;
  if (rails < 2 || keys_.per_call() || (ch.negotiated.capabilities & wire::kCapRailKeys) == 0 ||
      announced_.sent(c.id(), ch.id, lane)) {
    return true;
  }
  wire::RailKeys& rk = scratch_keys_;
  rk = {};
  rk.addr = c.mr.tx_addr();
  rk.length = c.mr.tx_length();
  rk.rails = rails;
  for (std::uint32_t i = 0; i < rails; ++i) rk.rkey[i] = c.mr.tx_rkey(i);
  transport::SendWr wr;
  wr.header.type = wire::MsgType::RailKeys;
  wr.header.aux = rails;
  wr.prefix_len = static_cast<std::uint8_t>(wire::encode_rail_keys(rk, wr.prefix));
  wr.signaled = false;
  if (wr.prefix_len == 0 || rk.length == 0) return true;  // nothing to tell (cannot happen with rails)
  const transport::PostResult posted = peers_.post(ch, lane, wr);
  if (posted.accepted != 1) return false;
  announced_.mark(c.id(), ch.id, lane);
  bump(counters_.rail_keys_sent);
  return true;
}

Outcome RemoteSender::post_request(ClientSession& c, const Endpoint& ep, peer::Channel& ch, std::uint64_t token,
                                   RemoteOp& rop) {
  const Shape s = shape_of(c, rop.entry);
  // Several rails: the peer learns the arena's keys on every rail first, on
  // this lane (so in order before the request, replays included).
  if (s.exposed() && !announce_keys(c, ch, lane_key(c, ep))) return Outcome::blocked();
  transport::SendWr wr = request_wr(c, ep, s, token, rop);
  // The peer's answer completes the op; a failed WR still reports
  // (on_send_done) and fails it. A payload from the client's arena goes
  // signaled and tracked (zero_copy.h); otherwise unsignaled.
  const std::uint64_t zc = wr.payload_len != 0 ? sessions_.track_wr(c, WrTag::remote_op(token)) : 0;
  if (wr.payload_len != 0 && zc == 0) return Outcome::blocked();  // every tracking slot busy: never post untracked
  wr.user_data = zc != 0 ? zc : WrTag::remote_op(token);
  wr.signaled = zc != 0;
  if (zc != 0 && s.rdma) wr.local = c.mr.tx();
  const transport::PostResult posted = peers_.post(ch, lane_key(c, ep), wr);
  if (posted.accepted != 1) {
    (void)sessions_.wr_done(zc);  // never posted: its slot is free again
    return posted.status == Status::Busy ? Outcome::blocked() : Outcome::failed(Status::PeerReset);
  }
  rop.posted = true;
  return Outcome::done();
}

Outcome RemoteSender::offer(ClientSession& c, Endpoint& ep, const Operation& op, Attempt& at) {
  RemoteLink& r = ep.remote;
  peer::Channel* ch = r.peer_dead ? nullptr : peers_.find(r.channel);
  if (ch == nullptr || !ch->usable()) return Outcome::failed(Status::PeerReset);
  const Shape s = shape_of(c, op);
  if (s.oversize) return Outcome::failed(Status::BadRequest);  // over max-message-bytes on tcp lanes
  const std::uint32_t lane = lane_key(c, ep);
  if (const Outcome o = admit(*ch, ep, lane, op, at, !s.rendezvous); !o.is_done()) return o;

  RemoteOp rop;
  rop.kind = s.is_call ? RemoteOpKind::Call : RemoteOpKind::Send;
  rop.client = c.id();
  rop.endpoint = ep.id;
  rop.channel = ch->id;
  rop.lane = lane % ch->lane_count;
  rop.user_data = op.user_data;
  rop.resp_offset = op.resp_offset;
  rop.resp_length = op.resp_length;
  rop.bytes = op.length;
  rop.exposed = s.exposed();
  rop.resp_buffer = s.resp_buffer;
  rop.entry = op;
  // The number the peer expects next if we gave a refused op up (only when
  // lower than the op's own: an earlier refused op still waiting here goes
  // with its own number first), else the op's own (a resend) or a new one.
  const bool resync = r.resync_seq != 0 && (at.seq == 0 || r.resync_seq < at.seq);
  rop.seq = resync ? r.resync_seq : at.seq != 0 ? at.seq : r.next_seq++;
  rop.again = at.seq != 0 || resync;
  rop.deadline_ns = at.deadline_ns != 0 ? at.deadline_ns : deadlines_.now() + deadlines_.delivery_timeout_ns();
  rop.answer_by_ns = s.is_call ? deadlines_.backstop(op.timeout_ms) : 0;
  const std::uint64_t token = ops_.insert(std::move(rop));
  RemoteOp& held = *ops_.find(token);  // the table is a deque: the reference stays put
  // A peer may READ or WRITE the client's memory until it answers: the
  // session (its MR) outlives that, and the keys opened for it.
  if (held.exposed) {
    sessions_.hold(c);
    ++exposed_;
    if (large_bytes_ != 0 && std::max(op.length, op.resp_length) >= large_bytes_) ++large_started_;
  }
  if (const Status k = open_keys(c, op, s, token, held); k != Status::Ok) {
    // Every window in use: wait like a full send window (keys opened
    // already close first; nobody hears of this op).
    if (conclude(token, held, k, 0, false)) ops_.erase(token);
    return k == Status::Busy ? Outcome::blocked() : Outcome::failed(k);
  }
  if (held.opening == 0) {
    const Outcome o = post_request(c, ep, *ch, token, held);
    if (!o.is_done()) {
      if (held.exposed) {
        sessions_.release_hold(c.id());
        --exposed_;
      }
      ops_.erase(token);
      if (o.is_blocked()) stall(ch->id, at);  // the lane's ring filled after all: wait like a full window
      return o;
    }
  }
  // Its keys are being opened: the request goes once they are (poll_keys).
  if (held.opening != 0) r.keys_opening = true;
  windows_.charge(ch->id, lane % ch->lane_count, r, op.length);
  held.charged = true;
  if (resync) r.resync_seq = 0;
  if (s.rendezvous) bump(counters_.rendezvous_sends);
  if (s.rdma && s.is_call && !s.resp_buffer && op.resp_length != 0) bump(counters_.eager_responses);
  bump(s.is_call ? counters_.remote_calls : counters_.remote_sends);
  return Outcome::done();
}

void RemoteSender::given_up(Endpoint& ep, const Attempt& at) noexcept {
  // A refused op given up: the peer waits for its number; the next op sent
  // carries it (offer).
  RemoteLink& r = ep.remote;
  if (at.seq != 0 && (r.resync_seq == 0 || at.seq < r.resync_seq)) r.resync_seq = at.seq;
}

}  // namespace ferry::daemon
