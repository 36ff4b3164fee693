// How our remote ops end: the peer's answers, failed WRs, an endpoint
// closed, a client detached, a channel down, a peer that never answers (the
// backstop), and the keys that must be closed before any of them reaches
// the client (conclude, poll_keys).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
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

void RemoteSender::unblock(const RemoteOp& op) noexcept {
  if (op.posted || op.kind == RemoteOpKind::Open) return;
  ClientSession* c = sessions_.find(op.client);
  if (Endpoint* ep = c != nullptr ? c->find_endpoint(op.endpoint) : nullptr) ep->remote.keys_opening = false;
}

bool RemoteSender::conclude(std::uint64_t token, RemoteOp& op, Status outcome, std::uint32_t length, bool notify) {
  if (!op.concluding) {
    unblock(op);  // never sent: later ops of its endpoint go now
    op.concluding = true;
    op.outcome = outcome;
    op.outcome_length = length;
    op.notify = notify;
    if (op.charged) {
      ClientSession* c = sessions_.find(op.client);
      Endpoint* ep = c != nullptr ? c->find_endpoint(op.endpoint) : nullptr;
      windows_.release(op.channel, op.lane, ep != nullptr ? &ep->remote : nullptr, op.bytes);
      op.charged = false;
    }
    // The peer has answered (or never will): its keys die before the memory
    // goes back to the client or the session's MR is deregistered.
    for (auto [key, which] : {std::pair{&op.key_src, 0u}, std::pair{&op.key_resp, 1u}}) {
      if (key->slot == 0) continue;
      keys_.close(*key, key_cookie(token, which));
      ++op.closing;
      *key = RemoteKey{};
    }
  }
  if (op.closing != 0) return false;
  end(op);
  return true;
}

void RemoteSender::end(RemoteOp& op) noexcept {
  if (op.exposed) {
    sessions_.release_hold(op.client);
    --exposed_;
  }
  if (op.notify) sessions_.complete(op.client, op_of(op.kind), op.user_data, op.outcome, op.outcome_length);
}

std::size_t RemoteSender::poll_keys() {
  if (!keys_pending()) return 0;
  std::size_t work = 0;
  std::array<KeyDone, 32> done;
  const std::size_t n = keys_.poll(done);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t token = done[i].cookie >> 1;
    RemoteOp* op = ops_.find(token);
    if (op == nullptr) continue;
    ++work;
    if (!done[i].closed) {
      if (!done[i].ok) op->key_failed = true;
      if (op->opening != 0 && --op->opening == 0) opened(token, *op);
    } else if (op->closing != 0 && --op->closing == 0 && op->concluding) {
      end(*op);
      ops_.erase(token);
    }
  }
  // Requests whose keys opened while their lane had no room.
  for (std::size_t i = 0; i < postable_.size();) {
    const std::uint64_t token = postable_[i];
    postable_[i] = postable_.back();
    postable_.pop_back();
    if (RemoteOp* op = ops_.find(token)) opened(token, *op);  // posts it, or keeps it here again
    ++work;
    if (i >= postable_.size()) break;
  }
  return work;
}

void RemoteSender::opened(std::uint64_t token, RemoteOp& op) {
  if (op.concluding) return;  // ended meanwhile: its keys close next
  ClientSession* c = sessions_.find(op.client);
  Endpoint* ep = c != nullptr ? c->find_endpoint(op.endpoint) : nullptr;
  peer::Channel* ch = ep != nullptr && !ep->remote.peer_dead ? peers_.find(op.channel) : nullptr;
  Status failure = Status::Ok;
  if (op.key_failed) {
    failure = Status::ProtocolError;  // the device refused a bind (logged)
  } else if (ep == nullptr) {
    failure = Status::Cancelled;
  } else if (ch == nullptr || !ch->usable()) {
    failure = Status::PeerReset;
  } else {
    const Outcome o = post_request(*c, *ep, *ch, token, op);
    if (o.is_done()) {
      ep->remote.keys_opening = false;  // sent: the endpoint's next op may go
      return;
    }
    if (o.is_blocked()) {
      postable_.push_back(token);  // the lane's ring or the tracking slots are full: again next turn
      return;
    }
    failure = o.status;
  }
  if (conclude(token, op, failure, 0, true)) ops_.erase(token);
}

void RemoteSender::on_response(peer::Channel& ch, const wire::Header& h, const std::byte* payload) {
  RemoteOp* found = ops_.find(h.token);
  // Late (failed, cancelled, ending) or forged: nothing to do.
  if (found == nullptr || found->channel != ch.id || !is_request(*found) || found->concluding) return;
  RemoteOp& op = *found;
  const std::uint64_t token = h.token;
  auto done = [&](Status s, std::uint32_t length) {
    if (conclude(token, op, s, length, true)) ops_.erase(token);
  };
  ClientSession* c = sessions_.find(op.client);
  if (c == nullptr || op.cancelled) return done(Status::Cancelled, 0);  // nobody hears it, or Cancelled
  const shm::Op kind = op_of(op.kind);
  if (Endpoint* ep = c->find_endpoint(op.endpoint)) {
    if (h.status == Status::Busy && !ep->remote.peer_dead) {
      // The receiver is full: hold the op here and send it again after a
      // backoff, until its delivery deadline (then Timeout).
      const std::uint64_t now = deadlines_.now();
      if (now < op.deadline_ns) {
        refused(*c, *ep, op, now);  // a new op goes with the same number
        if (conclude(token, op, Status::Busy, 0, false)) ops_.erase(token);
        return;
      }
      bump(counters_.timeouts);
      given_up(*ep, Attempt{op.deadline_ns, 0, op.seq, false});  // still awaited at the peer
      return done(Status::Timeout, 0);
    }
    ep->remote.backoff_ns = 0;
  }
  if (kind == shm::Op::Send || h.status != Status::Ok) {
    return done(h.status, h.status == Status::ResponseTooLarge ? h.aux : 0);
  }
  if (h.payload_len > op.resp_length) return done(Status::ResponseTooLarge, h.payload_len);
  if (h.payload_len != 0) {
    std::memcpy(c->at(op.resp_offset), payload, h.payload_len);
    bump(counters_.bytes_copied, h.payload_len);
  }
  bump(counters_.replies);
  done(Status::Ok, h.payload_len);
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
  if (found == nullptr || found->channel != ch.id || found->kind != RemoteOpKind::Call || !found->resp_buffer ||
      found->concluding) {
    spdlog::warn("channel {}: WRITE with immediate {} names no call waiting for one; ignored", ch.id, h.token);
    return;
  }
  RemoteOp& op = *found;
  Status outcome = Status::Ok;
  if (op.cancelled) {
    outcome = Status::Cancelled;
  } else if (h.aux > op.resp_length) {
    // The NIC wrote h.aux bytes; more than the buffer means a peer that
    // ignored the descriptor's length: report it rather than trust it.
    spdlog::warn("channel {}: peer wrote {} bytes into a {}-byte response buffer", ch.id, h.aux, op.resp_length);
    outcome = Status::ProtocolError;
  } else {
    bump(counters_.replies);
    bump(counters_.zero_copy_replies);
  }
  if (conclude(token, op, outcome, outcome == Status::Ok ? h.aux : 0, true)) ops_.erase(token);
}

void RemoteSender::on_send_done(std::uint64_t token, Status status) {
  if (status == Status::Ok) return;  // Send/Call/Open wait for the peer's answer
  RemoteOp* found = ops_.find(token);
  if (found == nullptr || found->concluding) return;
  if (!is_request(*found)) {
    sessions_.complete(found->client, op_of(found->kind), found->user_data, Status::PeerReset);
    ops_.erase(token);
    return;
  }
  if (conclude(token, *found, Status::PeerReset, 0, true)) ops_.erase(token);
}

void RemoteSender::close(ClientSession& c, Endpoint& ep) {
  // Its Sends/Calls still waiting for the peer complete Cancelled: at once,
  // or, where the peer may still READ or WRITE the client's memory, when
  // the peer answers (it answers every call of a closed proxy, on the same
  // lane, after any WRITE it posted). One whose keys were still opening
  // was never sent: nothing of the peer's to wait for.
  ops_.sweep([&](std::uint64_t token, RemoteOp& op) {
    if (op.client != c.id() || op.endpoint != ep.id || !is_request(op) || op.concluding) return false;
    if (op.exposed && op.posted) {
      op.cancelled = true;
      return false;
    }
    return conclude(token, op, Status::Cancelled, 0, true);
  });
  peer::Channel* ch = peers_.find(ep.remote.channel);
  if (ep.remote.peer_dead || ch == nullptr || !ch->usable()) return;
  say_close(*ch, lane_key(c, ep), ep.id, ep.remote.remote_ep);
  peers_.unbind_endpoint(*ch);
}

void RemoteSender::client_gone(ClientSession& gone) {
  announced_.client_gone(gone.id());
  // Nobody to complete to: its remote ops end (answers then find nothing)
  // except those exposing its memory to a peer, which keep the session
  // retired until answered; close its remote endpoints so peers drop their
  // proxies.
  ops_.sweep([&](std::uint64_t token, RemoteOp& op) {
    if (op.client != gone.id()) return false;
    if (!is_request(op)) return true;  // an Open
    if (op.concluding) return false;
    if (op.exposed && op.posted) {
      op.cancelled = true;
      return false;
    }
    return conclude(token, op, Status::Cancelled, 0, false);
  });
  for (auto& [id, ep] : gone.endpoints) {
    if (ep.is_remote()) close(gone, ep);
  }
}

void RemoteSender::channel_down(peer::Channel& ch, Status why) {
  const std::uint32_t id = ch.id;
  announced_.channel_down(id);
  const Status open_status = why == Status::Ok ? Status::PeerReset : why;
  std::size_t failed = 0, moved = 0, kept = 0;
  // Opens not answered yet move to the peer's other channel (the winner of a
  // duplicate race, or one still handshaking): an Open creates nothing until
  // its OpenAck, and a proxy the peer made for the first try dies with this
  // channel there, so asking again is safe. Its late OpenAck on this channel
  // is ignored (on_open_ack matches the channel).
  peer::Channel* next = peers_.successor(ch);
  const bool next_up = next != nullptr && peers_.route(next->id) == next;
  // (Busy: a lane's dial found no free connection slot here; the same wait.)
  const bool slow_handshake = (why == Status::PeerUnreachable || why == Status::Busy) && ch.initiated && !ch.was_up &&
                              ch.bootstrap_stats.tx_msgs != 0;
  // A channel the peer dialled (an Open joined it while it handshook, or
  // moved to it from a duplicate of ours) that failed before it was Up: the
  // peer's host was there a moment ago, and the Open named its address, not
  // this channel; it dials that address itself.
  const bool peer_dialled = !ch.initiated && !ch.was_up;
  ops_.sweep([&](std::uint64_t token, RemoteOp& op) {
    if (op.channel != id || op.concluding) return false;
    if (op.kind == RemoteOpKind::Open && next != nullptr) {
      op.channel = next->id;
      op.sent = false;
      ++moved;
      if (next_up) send_open(token, op, *next);  // erases the op itself if the post fails
      return false;                              // otherwise on_channel_up(next) sends it
    }
    // A handshake that missed connect-timeout-ms on a connection the peer's
    // host answered (our Hello went): a slow peer, not a dead one. Its Opens
    // ride it out, dialled again shortly, within their budget.
    if (op.kind == RemoteOpKind::Open && (slow_handshake || peer_dialled) &&
        park_open(op, deadlines_.now(), why == Status::Busy)) {
      ++kept;
      return false;
    }
    ++failed;
    if (op.kind == RemoteOpKind::Open) {
      const bool no_room = op.found_no_room && open_status == Status::PeerUnreachable;  // an earlier try's reason
      sessions_.complete(op.client, shm::Op::Open, op.user_data, no_room ? Status::Busy : open_status);
      return true;
    }
    const Status st = op.cancelled ? Status::Cancelled : op.overdue ? Status::Timeout : Status::PeerReset;
    return conclude(token, op, st, 0, true);
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
  // Nothing of ours on it (a stranger's channel, say): its state change says enough.
  spdlog::log(failed + moved + kept + endpoints == 0 ? spdlog::level::debug : spdlog::level::info,
              "channel {} down ({}): {} operations failed, {} opens moved to channel {}, {} opens kept for a "
              "redial, {} endpoints closed",
              id, to_string(why), failed, moved, next != nullptr ? next->id : 0, kept, endpoints);
}

Sweep RemoteSender::expire(std::uint64_t now_ns) {
  Sweep out;
  overdue_.clear();
  ops_.sweep([&](std::uint64_t token, RemoteOp& op) {
    if (op.kind != RemoteOpKind::Call || op.answer_by_ns == 0 || op.overdue || op.concluding) return false;
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
  retry_opens(now_ns, out);
  std::sort(overdue_.begin(), overdue_.end());
  overdue_.erase(std::unique(overdue_.begin(), overdue_.end()), overdue_.end());
  for (std::uint32_t id : overdue_) {
    if (peer::Channel* ch = peers_.find(id)) peers_.fail_channel(*ch, Status::Timeout, now_ns);
  }
  return out;
}

}  // namespace ferry::daemon
