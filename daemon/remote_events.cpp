// What the channel layer reports to the engine: a channel came up (send the
// Opens that waited for it), went down (fail everything that depended on
// it, exactly once), a message arrived, a WR finished.
#include <spdlog/spdlog.h>

#include <chrono>

#include "daemon/engine.h"
#include "daemon/mono_clock.h"

namespace ferry::daemon {

namespace {

shm::Op op_of(peer::RemoteOpKind k) noexcept {
  switch (k) {
    case peer::RemoteOpKind::Open: return shm::Op::Open;
    case peer::RemoteOpKind::Send: return shm::Op::Send;
    case peer::RemoteOpKind::Call: return shm::Op::Call;
    case peer::RemoteOpKind::Reply: return shm::Op::Reply;
  }
  return shm::Op::Nop;
}

}  // namespace

void Engine::on_channel_up(peer::Channel& ch) {
  // A losing duplicate forwards its waiting Opens to the winner.
  peer::Channel* target = peers_->route(ch.id);
  remote_ops_.sweep([&](std::uint64_t token, peer::RemoteOp& op) {
    if (op.kind != peer::RemoteOpKind::Open || op.sent || op.channel != ch.id) return false;
    if (target == nullptr) {
      if (ClientSession* c = client(op.client)) complete(*c, shm::Op::Open, op.user_data, Status::PeerUnreachable);
      return true;
    }
    send_open(token, op, *target);  // erases the op itself if the post fails
    return false;
  });
  publish_peers(mono_ns(), true);
}

void Engine::on_channel_down(peer::Channel& ch, Status why) {
  const std::uint32_t id = ch.id;
  // 1. Our operations that went to it.
  const Status open_status = why == Status::Ok ? Status::PeerReset : why;
  std::size_t failed = 0, moved = 0;
  // Opens not answered yet move to the peer's other channel (the winner of a
  // duplicate race, or one still handshaking): an Open creates nothing until
  // its OpenAck, and a proxy the peer made for the first try dies with this
  // channel there, so asking again is safe. Its late OpenAck on this channel
  // is ignored (on_open_ack matches the channel).
  peer::Channel* next = peers_->successor(ch);
  const bool next_up = next != nullptr && peers_->route(next->id) == next;
  remote_ops_.sweep([&](std::uint64_t token, peer::RemoteOp& op) {
    if (op.channel != id) return false;
    if (op.kind == peer::RemoteOpKind::Open && next != nullptr) {
      op.channel = next->id;
      op.sent = false;
      ++moved;
      if (next_up) send_open(token, op, *next);  // erases the op itself if the post fails
      return false;                              // otherwise on_channel_up(next) sends it
    }
    if (op.kind == peer::RemoteOpKind::Send || op.kind == peer::RemoteOpKind::Call) finish_remote_op(op);
    if (ClientSession* c = client(op.client)) {
      const Status st = op.kind == peer::RemoteOpKind::Open ? open_status
                        : op.cancelled                      ? Status::Cancelled
                        : op.overdue                        ? Status::Timeout
                                                            : Status::PeerReset;
      complete(*c, op_of(op.kind), op.user_data, st);
    }
    ++failed;
    return true;
  });
  // 2. Our clients' endpoints over it: closed; later ops get PeerReset.
  std::size_t endpoints = 0;
  for (ClientSession* c : order_) {
    for (auto& [eid, ep] : c->endpoints) {
      if (ep.channel == id && !ep.peer_dead) {
        ep.peer_dead = true;
        ++endpoints;
      }
    }
  }
  // 3. The peer's proxies here, its calls being served (late replies get
  //    CallerGone) and its staged deliveries.
  std::erase_if(proxies_, [id](const auto& kv) { return kv.second.channel == id; });
  calls_.sweep([id](PendingCall& call) {
    if (call.remote_channel == id) call.caller_gone = true;
    return false;
  });
  for (auto it = staged_.begin(); it != staged_.end();) {
    if (it->channel == id) {
      staged_bytes_ -= it->header.payload_len;
      it = staged_.erase(it);
    } else {
      ++it;
    }
  }
  spdlog::info("channel {} down ({}): {} operations failed, {} opens moved to channel {}, {} endpoints closed", id,
               to_string(why), failed, moved, next != nullptr ? next->id : 0, endpoints);
  publish_peers(mono_ns(), true);
}

void Engine::on_message(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload) {
  switch (h.type) {
    case wire::MsgType::Open: on_remote_open(ch, lane, h, payload); break;
    case wire::MsgType::OpenAck: on_open_ack(ch, h); break;
    case wire::MsgType::Close: on_remote_close(h); break;
    case wire::MsgType::Send:
    case wire::MsgType::Call:
    case wire::MsgType::RendezvousReq: on_remote_delivery(ch, lane, h, payload); break;
    case wire::MsgType::Response: on_response(ch, h, payload); break;
    case wire::MsgType::WriteDone: on_write_done(ch, h); break;
    default:
      // Recovery types: not spoken yet by this daemon; a peer that sends
      // them anyway is ignored rather than trusted.
      spdlog::debug("channel {}: ignoring {}", ch.id, to_string(h.type));
      break;
  }
}

void Engine::on_send_done(std::uint64_t user_data, Status status) {
  WrTag tag = WrTag::decode(user_data);
  if (tag.kind == WrKind::ZeroCopy) tag = WrTag::decode(zc_done(user_data));  // releases the client's hold first
  switch (tag.kind) {
    case WrKind::None:
    case WrKind::ZeroCopy: return;  // untracked (answers, acks), or a slot already settled
    case WrKind::Read: on_read_done(tag.slot, status); return;
    case WrKind::RemoteOp: break;
  }
  user_data = tag.token();
  peer::RemoteOp* found = remote_ops_.find(user_data);
  if (found == nullptr) return;
  if (found->kind == peer::RemoteOpKind::Reply) {
    const peer::RemoteOp op = *found;
    remote_ops_.erase(user_data);
    if (ClientSession* c = client(op.client)) {
      complete(*c, shm::Op::Reply, op.user_data, status == Status::Ok ? Status::Ok : Status::PeerReset);
    }
    return;
  }
  if (status == Status::Ok) return;  // Send/Call/Open wait for the peer's answer
  const peer::RemoteOp op = *found;
  remote_ops_.erase(user_data);
  if (op.kind == peer::RemoteOpKind::Send || op.kind == peer::RemoteOpKind::Call) finish_remote_op(op);
  if (ClientSession* c = client(op.client)) complete(*c, op_of(op.kind), op.user_data, Status::PeerReset);
}

}  // namespace ferry::daemon
