// The peer's answers to our remote ops, their failures, and the ends of
// what they depend on: an endpoint closed, a client detached, a channel
// down, a peer that never answers (the backstop).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "daemon/peer/channel_manager.h"
#include "daemon/remote/remote_sender.h"

namespace ferry::daemon {

namespace {

shm::Op op_of(RemoteOpKind k) noexcept {
  switch (k) {
    case RemoteOpKind::Open: return shm::Op::Open;
    case RemoteOpKind::Send: return shm::Op::Send;
    case RemoteOpKind::Call: return shm::Op::Call;
    case RemoteOpKind::Reply: return shm::Op::Reply;
  }
  return shm::Op::Nop;
}

bool is_request(const RemoteOp& op) noexcept { return op.kind == RemoteOpKind::Send || op.kind == RemoteOpKind::Call; }

}  // namespace

void RemoteSender::finish(const RemoteOp& op) noexcept {
  ClientSession* c = sessions_.find(op.client);
  Endpoint* ep = c != nullptr ? c->find_endpoint(op.endpoint) : nullptr;
  windows_.release(op.channel, op.lane, ep != nullptr ? &ep->remote : nullptr, op.bytes);
  // The peer has answered (or the channel is gone): its keys die before the
  // memory goes back to the client or the session's MR is deregistered.
  keys_.close(op.key_src);
  keys_.close(op.key_resp);
  if (op.exposed) sessions_.release_hold(op.client);
}

void RemoteSender::on_response(peer::Channel& ch, const wire::Header& h, const std::byte* payload) {
  RemoteOp* found = ops_.find(h.token);
  if (found == nullptr || found->channel != ch.id || !is_request(*found)) return;  // late (failed, cancelled) or forged
  const RemoteOp op = *found;
  ops_.erase(h.token);
  finish(op);
  ClientSession* c = sessions_.find(op.client);
  if (c == nullptr) return;
  const shm::Op kind = op_of(op.kind);
  if (op.cancelled) {
    sessions_.complete(*c, kind, op.user_data, Status::Cancelled);
    return;
  }
  if (Endpoint* ep = c->find_endpoint(op.endpoint)) {
    if (h.status == Status::Busy && !ep->remote.peer_dead) {
      // The receiver is full: hold the op here and send it again after a
      // backoff, until its delivery deadline (then Timeout).
      const std::uint64_t now = deadlines_.now();
      if (now < op.deadline_ns) {
        refused(*c, *ep, op, now);
        return;
      }
      bump(counters_.timeouts);
      given_up(*ep, Attempt{op.deadline_ns, 0, op.seq, false});  // still awaited at the peer
      sessions_.complete(*c, kind, op.user_data, Status::Timeout);
      return;
    }
    ep->remote.backoff_ns = 0;
  }
  if (kind == shm::Op::Send || h.status != Status::Ok) {
    sessions_.complete(*c, kind, op.user_data, h.status, 0, h.status == Status::ResponseTooLarge ? h.aux : 0);
    return;
  }
  if (h.payload_len > op.resp_length) {
    sessions_.complete(*c, shm::Op::Call, op.user_data, Status::ResponseTooLarge, 0, h.payload_len);
    return;
  }
  if (h.payload_len != 0) {
    std::memcpy(c->at(op.resp_offset), payload, h.payload_len);
    bump(counters_.bytes_copied, h.payload_len);
  }
  bump(counters_.replies);
  sessions_.complete(*c, shm::Op::Call, op.user_data, Status::Ok, 0, h.payload_len);
}

void RemoteSender::refused(ClientSession& c, Endpoint& ep, const RemoteOp& op, std::uint64_t now_ns) {
  constexpr std::uint64_t kMinBackoffNs = 1'000'000, kMaxBackoffNs = 64'000'000;
  RemoteLink& r = ep.remote;
  r.backoff_ns = std::clamp(r.backoff_ns * 2, kMinBackoffNs, kMaxBackoffNs);
  r.paused_until_ns = now_ns + r.backoff_ns;
  r.resend_wait = true;
  parking_.refused(c, ep, op.entry, Attempt{op.deadline_ns, 0, op.seq, false});
  bump(counters_.busy_backoffs);
}

void RemoteSender::on_write_done(peer::Channel& ch, const wire::Header& h) {
  // The reply is already in the caller's response buffer: no copy here.
  std::uint64_t token = 0;
  RemoteOp* found = ops_.find_slot(static_cast<std::uint32_t>(h.token), &token);
  if (found == nullptr || found->channel != ch.id || found->kind != RemoteOpKind::Call || !found->resp_buffer) {
    spdlog::warn("channel {}: WRITE with immediate {} names no call waiting for one; ignored", ch.id, h.token);
    return;
  }
  const RemoteOp op = *found;
  ops_.erase(token);
  finish(op);
  ClientSession* c = sessions_.find(op.client);
  if (c == nullptr) return;
  if (op.cancelled) {
    sessions_.complete(*c, shm::Op::Call, op.user_data, Status::Cancelled);
    return;
  }
  // The NIC wrote h.aux bytes; more than the buffer means a peer that
  // ignored the descriptor's length: report it rather than trust it.
  if (h.aux > op.resp_length) {
    spdlog::warn("channel {}: peer wrote {} bytes into a {}-byte response buffer", ch.id, h.aux, op.resp_length);
    sessions_.complete(*c, shm::Op::Call, op.user_data, Status::ProtocolError);
    return;
  }
  bump(counters_.replies);
  bump(counters_.zero_copy_replies);
  sessions_.complete(*c, shm::Op::Call, op.user_data, Status::Ok, 0, h.aux);
}

void RemoteSender::on_send_done(std::uint64_t token, Status status) {
  if (status == Status::Ok) return;  // Send/Call/Open wait for the peer's answer
  RemoteOp* found = ops_.find(token);
  if (found == nullptr) return;
  const RemoteOp op = *found;
  ops_.erase(token);
  if (is_request(op)) finish(op);
  sessions_.complete(op.client, op_of(op.kind), op.user_data, Status::PeerReset);
}

void RemoteSender::close(ClientSession& c, Endpoint& ep) {
  // Its Sends/Calls still waiting for the peer complete Cancelled: at once,
  // or, where the peer may still READ or WRITE the client's memory, when
  // the peer answers (it answers every call of a closed proxy, on the same
  // lane, after any WRITE it posted).
  ops_.sweep([&](std::uint64_t, RemoteOp& op) {
    if (op.client != c.id() || op.endpoint != ep.id || !is_request(op)) return false;
    if (op.exposed) {
      op.cancelled = true;
      return false;
    }
    finish(op);
    sessions_.complete(c, op_of(op.kind), op.user_data, Status::Cancelled);
    return true;
  });
  peer::Channel* ch = peers_.find(ep.remote.channel);
  if (ep.remote.peer_dead || ch == nullptr || !ch->usable()) return;
  say_close(*ch, ep.id, ep.id, ep.remote.remote_ep);
  peers_.unbind_endpoint(*ch);
}

void RemoteSender::client_gone(ClientSession& gone) {
  // Nobody to complete to: drop its remote ops (answers then find nothing)
  // except those exposing its memory, which keep the session retired until
  // answered; close its remote endpoints so peers drop their proxies.
  ops_.sweep([&](std::uint64_t, RemoteOp& op) {
    if (op.client != gone.id()) return false;
    if (op.exposed) {
      op.cancelled = true;
      return false;
    }
    if (is_request(op)) finish(op);
    return true;
  });
  for (auto& [id, ep] : gone.endpoints) {
    if (ep.is_remote()) close(gone, ep);
  }
}

void RemoteSender::channel_down(peer::Channel& ch, Status why) {
  const std::uint32_t id = ch.id;
  const Status open_status = why == Status::Ok ? Status::PeerReset : why;
  std::size_t failed = 0, moved = 0;
  // Opens not answered yet move to the peer's other channel (the winner of a
  // duplicate race, or one still handshaking): an Open creates nothing until
  // its OpenAck, and a proxy the peer made for the first try dies with this
  // channel there, so asking again is safe. Its late OpenAck on this channel
  // is ignored (on_open_ack matches the channel).
  peer::Channel* next = peers_.successor(ch);
  const bool next_up = next != nullptr && peers_.route(next->id) == next;
  ops_.sweep([&](std::uint64_t token, RemoteOp& op) {
    if (op.channel != id) return false;
    if (op.kind == RemoteOpKind::Open && next != nullptr) {
      op.channel = next->id;
      op.sent = false;
      ++moved;
      if (next_up) send_open(token, op, *next);  // erases the op itself if the post fails
      return false;                              // otherwise on_channel_up(next) sends it
    }
    if (is_request(op)) finish(op);
    const Status st = op.kind == RemoteOpKind::Open ? open_status
                      : op.cancelled                ? Status::Cancelled
                      : op.overdue                  ? Status::Timeout
                                                    : Status::PeerReset;
    sessions_.complete(op.client, op_of(op.kind), op.user_data, st);
    ++failed;
    return true;
  });
  windows_.channel_down(id);
  // Our clients' endpoints over it: closed; later ops get PeerReset.
  std::size_t endpoints = 0;
  for (ClientSession* c : sessions_.all()) {
    for (auto& [eid, ep] : c->endpoints) {
      if (ep.remote.channel == id && !ep.remote.peer_dead) {
        ep.remote.peer_dead = true;
        ++endpoints;
      }
    }
  }
  spdlog::info("channel {} down ({}): {} operations failed, {} opens moved to channel {}, {} endpoints closed", id,
               to_string(why), failed, moved, next != nullptr ? next->id : 0, endpoints);
}

Sweep RemoteSender::expire(std::uint64_t now_ns) {
  Sweep out;
  overdue_.clear();
  ops_.sweep([&](std::uint64_t token, RemoteOp& op) {
    if (op.kind != RemoteOpKind::Call || op.answer_by_ns == 0 || op.overdue) return false;
    if (now_ns < op.answer_by_ns) {
      out.next_ns = std::min(out.next_ns, op.answer_by_ns);
      return false;
    }
    op.overdue = true;
    ++out.expired;
    spdlog::error(
        "channel {}: the peer never answered call {:#x} (timeout plus 2 x peer-timeout passed); failing "
        "the channel",
        op.channel, token);
    overdue_.push_back(op.channel);
    return false;
  });
  std::sort(overdue_.begin(), overdue_.end());
  overdue_.erase(std::unique(overdue_.begin(), overdue_.end()), overdue_.end());
  for (std::uint32_t id : overdue_) {
    if (peer::Channel* ch = peers_.find(id)) peers_.fail_channel(*ch, Status::Timeout, now_ns);
  }
  return out;
}

}  // namespace ferry::daemon
