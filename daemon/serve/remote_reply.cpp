#include "daemon/serve/remote_reply.h"

#include "daemon/peer/channel_manager.h"
#include "daemon/remote/wr_tag.h"

namespace ferry::daemon {

RemoteReplier::RemoteReplier(Sessions& sessions, peer::ChannelManager& peers, Counters& counters,
                             std::uint32_t lane_max_message)
    : sessions_(sessions), peers_(peers), counters_(counters), lane_max_message_(lane_max_message) {}

Status RemoteReplier::reply(ClientSession& server, const Operation& op, const PendingCall& call) {
  auto done = [&](Status s) {
    sessions_.complete(server, shm::Op::Reply, op.user_data, s);
    return s;
  };
  peer::Channel* ch = call.caller_gone ? nullptr : peers_.find(call.remote_channel);
  if (ch == nullptr || !ch->usable()) return done(Status::CallerGone);
  // No room toward the caller: Busy, and the call stays open, so the answer
  // is not lost with the token. The server may reply again; if it does not,
  // the call's timeout answers the caller (calls.h).
  if (!peers_.has_room(*ch, call.lane) || (op.length != 0 && !sessions_.can_track_wr())) {
    bump(counters_.reply_stalls);
    return done(Status::Busy);
  }
  const bool write = call.resp_remote.rkey != 0;
  if ((write && op.length > call.resp_remote.length) || (!write && op.length > lane_max_message_)) {
    // Too large for the caller's buffer (or, without one, for a message):
    // both sides learn it, the caller with the length it would have needed.
    wire::Header no;
    no.type = wire::MsgType::Response;
    no.status = write ? Status::ResponseTooLarge : Status::NotSupported;
    no.aux = write ? op.length : 0;
    no.dst_ep = call.remote_ep;
    no.token = call.remote_token;
    peers_.send_control(*ch, call.lane, no);
    return done(no.status);
  }
  RemoteOp rop;
  rop.kind = RemoteOpKind::Reply;
  rop.client = server.id();
  rop.channel = ch->id;
  rop.lane = call.lane;
  rop.user_data = op.user_data;
  const std::uint64_t token = ops_.insert(std::move(rop));
  transport::SendWr wr;
  wr.op = write ? transport::WrOp::RdmaWriteImm : transport::WrOp::Send;
  wr.header.type = wire::MsgType::Response;
  wr.header.dst_ep = call.remote_ep;
  wr.header.token = call.remote_token;  // an immediate carries its low 32 bits
  wr.payload = server.at(op.offset);
  wr.payload_len = op.length;
  wr.remote = call.resp_remote;
  if (write) (void)peers_.peer_keys().fill(ch->id, call.resp_remote, wr.remote_rail_rkey);  // as Rendezvous::start
  wr.signaled = true;
  // A payload leaves from the server's tx arena: tracked, so the session
  // outlives the WR (rdma: the SGE names its MR).
  const std::uint64_t zc = op.length != 0 ? sessions_.track_wr(server, WrTag::reply(token)) : 0;
  if (op.length != 0 && zc == 0) {  // (checked above) never post client memory untracked
    ops_.erase(token);
    bump(counters_.reply_stalls);
    return done(Status::Busy);
  }
  wr.user_data = zc != 0 ? zc : WrTag::reply(token);
  if (zc != 0 && server.mr.valid()) wr.local = server.mr.tx();
  const transport::PostResult r = peers_.post(*ch, call.lane, wr);  // room was checked: only a dead channel refuses
  if (r.accepted != 1) {
    (void)sessions_.wr_done(zc);  // never posted: the slot is free again (0: nothing)
    ops_.erase(token);
    return done(Status::CallerGone);
  }
  bump(counters_.replies);
  if (write) bump(counters_.zero_copy_writes);
  return Status::Ok;
}

void RemoteReplier::on_send_done(std::uint64_t token, Status status) {
  RemoteOp* found = ops_.find(token);
  if (found == nullptr) return;
  const RemoteOp op = *found;
  ops_.erase(token);
  sessions_.complete(op.client, shm::Op::Reply, op.user_data, status == Status::Ok ? Status::Ok : Status::PeerReset);
}

void RemoteReplier::channel_down(std::uint32_t channel) {
  ops_.sweep([&](std::uint64_t, RemoteOp& op) {
    if (op.channel != channel) return false;
    sessions_.complete(op.client, shm::Op::Reply, op.user_data, Status::PeerReset);
    return true;
  });
}

void RemoteReplier::client_gone(std::uint32_t client) {
  ops_.sweep([client](std::uint64_t, RemoteOp& op) { return op.client == client; });
}

}  // namespace ferry::daemon
