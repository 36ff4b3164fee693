// Open("HOST:PORT/SERVICE"): the channel to that daemon (made or joined),
// the Open sent once it is up, the endpoint made at the peer's OpenAck.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/peer/channel_manager.h"
#include "daemon/remote/remote_sender.h"
#include "daemon/remote/wr_tag.h"

namespace ferry::daemon {

void RemoteSender::open(ClientSession& c, const Operation& op, const Target& t, std::uint8_t redirects) {
  const std::string host = t.remote.host == "localhost" ? std::string("127.0.0.1") : t.remote.host;
  if (t.remote.port == 0 || t.service.empty() || t.service.size() > wire::kMaxServiceNameBytes) {
    bump(counters_.bad_requests);
    sessions_.complete(c, shm::Op::Open, op.user_data, Status::BadRequest);
    return;
  }
  if (c.endpoint_cap_reached()) {
    sessions_.complete(c, shm::Op::Open, op.user_data, Status::NoMemory);
    return;
  }
  const std::string address =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(t.remote.port);
  const std::uint64_t now = deadlines_.now();
  auto ch = peers_.connect(address, host, t.remote.port, now);
  RemoteOp rop;
  rop.kind = RemoteOpKind::Open;
  rop.client = c.id();
  rop.user_data = op.user_data;
  rop.service = std::string(t.service);
  rop.open = op;
  rop.redirects = redirects;
  rop.host = host;
  rop.port = t.remote.port;
  rop.retry_until_ns = now + open_retry_ns_;
  if (!ch && ch.status == Status::Busy && park_open(rop, now, true)) {
    // No free peer connection slot here (the daemon is at
    // peer-max-connections for a moment): the Open waits for one, dialled
    // again within its budget, and fails Busy if none frees.
    (void)ops_.insert(std::move(rop));
    return;
  }
  if (!ch) {
    // Refused at once (locally, or the address failed just before: a dead
    // peer costs one dial per redial interval, not one per Open).
    sessions_.complete(c, shm::Op::Open, op.user_data, ch.status);
    return;
  }
  rop.channel = ch.value;
  const std::uint64_t token = ops_.insert(std::move(rop));
  // Up already: ask now. Otherwise on_channel_up sends it.
  if (peer::Channel* up = peers_.route(ch.value)) send_open(token, *ops_.find(token), *up);
}

void RemoteSender::send_open(std::uint64_t token, RemoteOp& op, peer::Channel& ch) {
  wire::Header h;
  h.type = wire::MsgType::Open;
  h.token = token;
  h.src_ep = static_cast<std::uint32_t>(token);  // provisional id until OpenAck; answers match by token
  op.channel = ch.id;
  op.sent = true;
  const auto* name = reinterpret_cast<const std::byte*>(op.service.data());
  const transport::PostResult r =
      peers_.send(ch, 0, h, name, static_cast<std::uint32_t>(op.service.size()), WrTag::remote_op(token), false);
  if (r.accepted != 1) {
    const std::uint32_t client = op.client;
    const std::uint64_t user_data = op.user_data;
    ops_.erase(token);
    sessions_.complete(client, shm::Op::Open, user_data, r.status == Status::Busy ? Status::Busy : Status::PeerReset);
  }
}

void RemoteSender::on_channel_up(peer::Channel& ch) {
  // A losing duplicate forwards its waiting Opens to the winner.
  peer::Channel* target = peers_.route(ch.id);
  ops_.sweep([&](std::uint64_t token, RemoteOp& op) {
    if (op.kind != RemoteOpKind::Open || op.sent || op.channel != ch.id) return false;
    if (target == nullptr) {
      sessions_.complete(op.client, shm::Op::Open, op.user_data, Status::PeerUnreachable);
      return true;
    }
    send_open(token, op, *target);  // erases the op itself if the post fails
    return false;
  });
}

bool RemoteSender::has_ops_on(std::uint32_t id) {
  bool found = false;
  ops_.sweep([&](std::uint64_t, RemoteOp& op) {
    found = found || op.channel == id;
    return false;
  });
  return found;
}

void RemoteSender::on_open_ack(peer::Channel& ch, const wire::Header& h) {
  RemoteOp* found = ops_.find(h.token);
  if (found == nullptr || found->kind != RemoteOpKind::Open || found->channel != ch.id) return;
  const RemoteOp op = *found;
  ops_.erase(h.token);
  ClientSession* c = sessions_.find(op.client);
  if (c == nullptr || c->doomed) {
    if (h.status == Status::Ok) say_close(ch, 0, 0, h.src_ep);  // nobody wants it any more: the peer drops its proxy
    return;
  }
  if ((h.flags & wire::kFlagRedirect) != 0 && redirects_ != nullptr) {
    // Another engine of the peer serves it: the Open goes there instead.
    redirects_->redirected(*c, op.open, wire::redirect_port(h.aux), wire::redirect_engine(h.aux),
                           static_cast<std::uint8_t>(op.redirects + 1));
    return;
  }
  if (h.status != Status::Ok) {
    sessions_.complete(*c, shm::Op::Open, op.user_data, h.status);
    return;
  }
  Endpoint& ep = c->add_endpoint(*this);
  ep.remote.channel = ch.id;
  ep.remote.remote_ep = h.src_ep;
  peers_.bind_endpoint(ch);
  sessions_.complete(*c, shm::Op::Open, op.user_data, Status::Ok, ep.id);
}

void RemoteSender::say_close(peer::Channel& ch, std::uint32_t lane, std::uint32_t from_ep, std::uint32_t to_ep) {
  wire::Header bye;
  bye.type = wire::MsgType::Close;
  bye.src_ep = from_ep;
  bye.dst_ep = to_ep;
  // Held while the lane has no room: a lost Close would leave the peer's
  // proxy (and its share of staging) in place for the channel's life.
  peers_.send_control(ch, lane, bye);
}

bool RemoteSender::park_open(RemoteOp& op, std::uint64_t now_ns, bool for_slot) noexcept {
  if (now_ns + kOpenRedialNs >= op.retry_until_ns) return false;
  op.channel = 0;
  op.sent = false;
  op.for_slot = for_slot;
  op.found_no_room = op.found_no_room || for_slot;
  op.retry_at_ns = now_ns + kOpenRedialNs;
  deadlines_.note(op.retry_at_ns);  // expire() comes back for it
  return true;
}

void RemoteSender::slot_freed() {
  // A connection closed after a dial found no free slot: the Opens that
  // wait for one dial now rather than at their next 100 ms turn (the first
  // takes the slot; the others join its channel or wait again).
  const std::uint64_t now = deadlines_.now();
  bool woke = false;
  ops_.sweep([&](std::uint64_t, RemoteOp& op) {
    if (op.kind != RemoteOpKind::Open || op.channel != 0 || !op.for_slot) return false;
    op.retry_at_ns = now;
    woke = true;
    return false;
  });
  if (woke) deadlines_.note(now);
}

void RemoteSender::retry_opens(std::uint64_t now_ns, Sweep& out) {
  redialled_.clear();
  ops_.sweep([&](std::uint64_t token, RemoteOp& op) {
    if (op.kind != RemoteOpKind::Open || op.channel != 0) return false;
    if (now_ns < op.retry_at_ns) {
      out.next_ns = std::min(out.next_ns, op.retry_at_ns);
      return false;
    }
    const std::string address =
        (op.host.find(':') != std::string::npos ? "[" + op.host + "]" : op.host) + ":" + std::to_string(op.port);
    auto ch = peers_.connect(address, op.host, op.port, now_ns);
    if (!ch) {
      // The address failed just before (its redial waits), or no slot is
      // free here yet: within the budget, the Open tries again later.
      const bool again = ch.status == Status::PeerUnreachable || ch.status == Status::Busy;
      if (again && park_open(op, now_ns, ch.status == Status::Busy)) {
        out.next_ns = std::min(out.next_ns, op.retry_at_ns);
        return false;
      }
      // Out of budget: Busy when a try found no room (the later dials only
      // waited out the address's redial interval), else why this one failed.
      const bool no_room = ch.status == Status::Busy || (op.found_no_room && ch.status == Status::PeerUnreachable);
      sessions_.complete(op.client, shm::Op::Open, op.user_data, no_room ? Status::Busy : ch.status);
      return true;
    }
    op.channel = ch.value;
    redialled_.push_back(token);  // Up already: asked below; otherwise on_channel_up asks
    return false;
  });
  for (std::uint64_t token : redialled_) {
    RemoteOp* op = ops_.find(token);
    if (op == nullptr || op->sent) continue;
    if (peer::Channel* up = peers_.route(op->channel)) send_open(token, *op, *up);
  }
}

}  // namespace ferry::daemon
