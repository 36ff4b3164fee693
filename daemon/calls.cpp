// Reply, ReleaseRx, and failing calls when a client goes away.
#include <spdlog/spdlog.h>

#include <cstring>

#include "daemon/engine.h"

namespace ferry::daemon {

void Engine::op_reply(ClientSession& c, const shm::SqEntry& e) {
  PendingCall* found = calls_.find(e.token);
  if (found == nullptr || found->server != c.id()) {
    bump(counters_.bad_requests);
    complete(c, shm::Op::Reply, e.user_data, Status::BadRequest);
    return;
  }
  const PendingCall call = *found;
  if (call.remote_channel != 0) {
    if (!reply_remote(c, e, call)) calls_.erase(e.token);  // a token is good for one reply
    return;
  }
  calls_.erase(e.token);  // a token is good for one reply
  ClientSession* caller = call.caller_gone ? nullptr : client(call.caller);
  if (caller == nullptr) {
    complete(c, shm::Op::Reply, e.user_data, Status::CallerGone);
    return;
  }
  if (e.length > call.resp_length) {
    // Both sides learn it; the caller's length says what it would have needed.
    complete(*caller, shm::Op::Call, call.user_data, Status::ResponseTooLarge, 0, e.length);
    complete(c, shm::Op::Reply, e.user_data, Status::ResponseTooLarge);
    return;
  }
  if (e.length != 0) {
    std::memcpy(caller->at(call.resp_offset), c.at(e.offset), e.length);
    bump(counters_.bytes_copied, e.length);
  }
  bump(counters_.replies);
  complete(*caller, shm::Op::Call, call.user_data, Status::Ok, 0, e.length);
  complete(c, shm::Op::Reply, e.user_data, Status::Ok);
}

bool Engine::reply_remote(ClientSession& c, const shm::SqEntry& e, const PendingCall& call) {
  peer::Channel* ch = call.caller_gone ? nullptr : peers_->find(call.remote_channel);
  if (ch == nullptr || !ch->usable()) {
    complete(c, shm::Op::Reply, e.user_data, Status::CallerGone);
    return false;
  }
  // No room toward the caller (its lane's ring full, or every zero-copy
  // tracking slot busy): Busy, and the call stays open, so the answer is not
  // lost with the token. The server may reply again; if it does not, the
  // call's timeout answers the caller (expire_calls).
  if (!peers_->has_room(*ch, call.lane) || (e.length != 0 && !zc_available())) {
    bump(counters_.reply_stalls);
    complete(c, shm::Op::Reply, e.user_data, Status::Busy);
    return true;
  }
  const bool write = call.resp_remote.rkey != 0;
  if ((write && e.length > call.resp_remote.length) || (!write && e.length > lane_max_message_)) {
    // Too large for the caller's buffer (or, without one, for a message):
    // both sides learn it, the caller with the length it would have needed.
    wire::Header no;
    no.type = wire::MsgType::Response;
    no.status = write ? Status::ResponseTooLarge : Status::NotSupported;
    no.aux = write ? e.length : 0;
    no.dst_ep = call.remote_ep;
    no.token = call.remote_token;
    peers_->send(*ch, call.lane, no, nullptr, 0, 0, false);
    complete(c, shm::Op::Reply, e.user_data, no.status);
    return false;
  }
  // The response leaves from the server's tx arena without a copy, so the
  // Reply completes on the transport's SendDone (on_send_done), when that
  // buffer is free again. The caller's daemon checks its buffer size.
  peer::RemoteOp op;
  op.kind = peer::RemoteOpKind::Reply;
  op.client = c.id();
  op.channel = ch->id;
  op.lane = call.lane;
  op.user_data = e.user_data;
  const std::uint64_t token = remote_ops_.insert(std::move(op));
  // rdma with the caller's response buffer: RDMA WRITE with immediate
  // straight from the server's tx arena into it (the immediate carries the
  // low 32 bits of the caller's token); otherwise a Response message.
  transport::SendWr wr;
  wr.op = write ? transport::WrOp::RdmaWriteImm : transport::WrOp::Send;
  wr.header.type = wire::MsgType::Response;
  wr.header.dst_ep = call.remote_ep;
  wr.header.token = call.remote_token;
  wr.payload = c.at(e.offset);
  wr.payload_len = e.length;
  wr.remote = call.resp_remote;
  wr.signaled = true;
  const std::uint64_t zc =
      e.length != 0 ? zc_track(c, WrTag::remote_op(token)) : 0;  // rdma: SGE from the server's tx arena
  if (e.length != 0 && zc == 0) {                                // (checked above) never post client memory untracked
    remote_ops_.erase(token);
    complete(c, shm::Op::Reply, e.user_data, Status::Busy);
    return true;
  }
  wr.user_data = zc != 0 ? zc : WrTag::remote_op(token);
  if (zc != 0 && c.mr.valid()) wr.local = c.mr.tx();
  const auto r = peers_->post(*ch, call.lane, wr);  // room was checked: only a dead channel refuses
  if (r.accepted != 1) {
    if (zc != 0) zc_done(zc);
    remote_ops_.erase(token);
    complete(c, shm::Op::Reply, e.user_data, Status::CallerGone);
    return false;
  }
  bump(counters_.replies);
  if (write) bump(counters_.zero_copy_writes);
  return false;
}

void Engine::op_release(ClientSession& c, const shm::SqEntry& e) {
  const Status s = c.rx.free(e.offset);
  if (s != Status::Ok) bump(counters_.bad_requests);
  if (s == Status::Ok && (e.flags & shm::kSqFlagQuiet) != 0) {
    if (c.outstanding != 0) --c.outstanding;
    bump(counters_.ops_completed);
    return;
  }
  complete(c, shm::Op::ReleaseRx, e.user_data, s);
}

void Engine::fail_calls_of(ClientSession& gone) {
  const std::uint32_t id = gone.id();
  calls_.sweep([&](PendingCall& call) {
    if (call.server == id && call.remote_channel != 0) {
      if (!call.caller_gone) {
        wire::Header to;
        to.src_ep = call.remote_ep;
        to.token = call.remote_token;
        answer(call.remote_channel, call.lane, to, Status::ServiceGone);
      }
      return true;
    }
    if (call.server == id) {
      // The server died before replying: the caller hears ServiceGone.
      ClientSession* caller = call.caller_gone ? nullptr : client(call.caller);
      if (caller != nullptr && caller != &gone) complete(*caller, shm::Op::Call, call.user_data, Status::ServiceGone);
      return true;
    }
    if (call.caller == id) call.caller_gone = true;  // a later reply gets CallerGone
    return false;
  });
}

}  // namespace ferry::daemon
