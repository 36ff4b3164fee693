// Peers' traffic to our services. Open creates a proxy endpoint (the peer's
// endpoint as seen here); Send/Call on it are delivered with the same code
// as local traffic (Engine::deliver), the payload copied once from the
// transport's receive buffer into the server's rx arena. Sends are answered
// at once with a zero-length Response carrying the outcome; Calls are
// answered by the server's Reply (calls.cpp, reply_remote).
//
// Back-pressure: when the server's rx arena or CQ is full the delivery is
// staged (copied to the daemon heap: the only datapath allocation, and only
// under back-pressure) up to staging_bytes, behind which the sender gets
// Busy. Staged deliveries keep their per-proxy order and time out after
// delivery_timeout_ms. Each proxy may use only a share of the staging area
// (per-endpoint receive capacity): a stopped consumer back-pressures its own
// senders (their windows at their daemon, then Busy) and never the other
// endpoints on the same channel.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "daemon/engine.h"
#include "daemon/mono_clock.h"

namespace ferry::daemon {

namespace {

// A proxy may fill at most 1/kStagingShares of staging-bytes (at least one message).
constexpr std::uint64_t kStagingShares = 8;

}  // namespace

void Engine::answer(peer::Channel& ch, std::uint32_t lane, const wire::Header& to, Status status) {
  wire::Header h;
  h.type = wire::MsgType::Response;
  h.status = status;
  h.dst_ep = to.src_ep;
  h.token = to.token;
  if (!peers_->has_room(ch, lane)) {
    held_answers_.push_back(HeldAnswer{ch.id, lane, h});
    bump(counters_.answer_stalls);
    return;
  }
  peers_->send(ch, lane, h, nullptr, 0, 0, false);
}

std::size_t Engine::flush_answers() {
  if (held_answers_.empty()) return 0;
  std::size_t sent = 0;
  for (auto it = held_answers_.begin(); it != held_answers_.end();) {
    peer::Channel* ch = peers_->find(it->channel);
    if (ch == nullptr || !ch->usable()) {
      it = held_answers_.erase(it);  // the channel ended: its ops fail at the caller's daemon
    } else if (peers_->has_room(*ch, it->lane)) {
      peers_->send(*ch, it->lane, it->header, nullptr, 0, 0, false);
      it = held_answers_.erase(it);
      ++sent;
    } else {
      ++it;
    }
  }
  return sent;
}

void Engine::answer(std::uint32_t channel, std::uint32_t lane, const wire::Header& to, Status status) {
  peer::Channel* ch = peers_->find(channel);
  if (ch != nullptr && ch->usable()) answer(*ch, lane, to, status);
}

void Engine::on_remote_open(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload) {
  const std::string_view name(reinterpret_cast<const char*>(payload), h.payload_len);
  wire::Header ack;
  ack.type = wire::MsgType::OpenAck;
  ack.token = h.token;
  ack.dst_ep = h.src_ep;
  const Service* s = services_.find(name);
  if (s == nullptr) {
    ack.status = Status::ServiceNotFound;
  } else {
    std::uint32_t id = next_proxy_id_++;
    while (id == 0 || proxies_.count(id) != 0) id = next_proxy_id_++;
    proxies_[id] = ProxyEndpoint{ch.id, s->id, lane, 0};
    peers_->bind_endpoint(ch);
    ack.src_ep = id;
  }
  peers_->send(ch, lane, ack, nullptr, 0, 0, false);
}

void Engine::answer_calls_of_proxy(std::uint32_t channel, std::uint32_t proxy) {
  // Calls from it still being served: their replies get CallerGone, and the
  // caller's daemon hears Cancelled now. It waits for this answer before it
  // hands a response buffer it exposed back to its client, and it comes on
  // the call's lane after any WRITE already posted into that buffer.
  calls_.sweep([&](PendingCall& call) {
    if (call.remote_channel != channel || call.endpoint != proxy || call.caller_gone) return false;
    call.caller_gone = true;
    wire::Header to;
    to.src_ep = call.remote_ep;
    to.token = call.remote_token;
    answer(channel, call.lane, to, Status::Cancelled);
    return false;
  });
}

void Engine::on_remote_close(const wire::Header& h) {
  auto it = proxies_.find(h.dst_ep);
  if (it == proxies_.end()) return;
  const std::uint32_t proxy = it->first;
  const std::uint32_t channel = it->second.channel;
  proxies_.erase(it);
  answer_calls_of_proxy(channel, proxy);
  if (peer::Channel* ch = peers_->find(channel)) peers_->unbind_endpoint(*ch);
}

Engine::Delivery Engine::deliver_remote(std::uint32_t channel, std::uint32_t lane, const wire::Header& h,
                                        const std::byte* payload, Status* failure, std::uint64_t call_deadline_ns) {
  if (h.type == wire::MsgType::RendezvousReq) {
    peer::Channel* ch = peers_->find(channel);
    if (ch == nullptr || !ch->usable()) {
      *failure = Status::PeerReset;
      return Delivery::Failed;
    }
    return start_read(*ch, lane, h, payload, failure, call_deadline_ns);
  }
  auto it = proxies_.find(h.dst_ep);
  if (it == proxies_.end() || it->second.channel != channel) {
    *failure = Status::EndpointClosed;
    return Delivery::Failed;
  }
  const Service* s = services_.find(it->second.service_id);
  if (s == nullptr) {
    *failure = Status::ServiceGone;
    return Delivery::Failed;
  }
  const bool is_call = h.type == wire::MsgType::Call;
  PendingCall call;
  call.endpoint = h.dst_ep;
  call.remote_channel = channel;
  call.remote_ep = h.src_ep;
  call.lane = lane;
  call.remote_token = h.token;
  call.deadline_ns = call_deadline_ns;
  std::uint32_t length = h.payload_len;
  if ((h.flags & wire::kFlagRespBuffer) != 0) {
    // The caller's response buffer rides in front of the request body.
    if (wire::decode_remote_buffer(std::span<const std::byte>(payload, wire::kRemoteBufferBytes), call.resp_remote) !=
        wire::WireError::None) {
      *failure = Status::BadRequest;
      return Delivery::Failed;
    }
    payload += wire::kRemoteBufferBytes;
    length -= wire::kRemoteBufferBytes;
  }
  const Delivery d = deliver(*s, is_call, payload, length, kRemoteSourceBit | h.dst_ep, call, failure);
  if (d == Delivery::Done) bump(counters_.remote_delivered);
  return d;
}

void Engine::on_remote_delivery(peer::Channel& ch, std::uint32_t lane, const wire::Header& h,
                                const std::byte* payload) {
  auto it = proxies_.find(h.dst_ep);
  if (it != proxies_.end() && it->second.refused_from != 0) {
    // After a Busy, everything later is refused until the refused op itself
    // comes again: the sender resends in order (remote_send.cpp).
    // (A sender that gives the refused op up sends its next op with that
    // number instead.)
    if (h.seq != it->second.refused_from) {
      bump(counters_.busy_rejects);
      answer(ch, lane, h, Status::Busy);
      return;
    }
    it->second.refused_from = 0;  // stage() sets it again if still full
  }
  if (h.type == wire::MsgType::Call && fault_.forget_this_call()) {
    spdlog::warn("engine: FAULT INJECTED: remote Call #{} (token {:#x}, channel {}) forgotten: no delivery, no answer",
                 fault_.calls_seen, h.token, ch.id);
    return;
  }
  // A Call's timeout counts from here: time staged or being READ counts.
  const std::uint64_t call_deadline = deadline_after(wire::call_timeout_ms(h));
  // Keep one sender's order: behind what waits, and eager ones behind READs.
  if (it != proxies_.end() &&
      (it->second.staged != 0 || (it->second.reading != 0 && h.type != wire::MsgType::RendezvousReq))) {
    stage(ch.id, lane, h, payload, call_deadline);
    return;
  }
  Status failure = Status::Ok;
  switch (deliver_remote(ch.id, lane, h, payload, &failure, call_deadline)) {
    case Delivery::Done:
      if (h.type == wire::MsgType::Send) answer(ch, lane, h, Status::Ok);
      break;
    case Delivery::Blocked: stage(ch.id, lane, h, payload, call_deadline); break;
    case Delivery::Failed: answer(ch, lane, h, failure); break;
  }
}

void Engine::stage(std::uint32_t channel, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
                   std::uint64_t call_deadline_ns) {
  // Each proxy (one remote endpoint) gets at most a share of the staging
  // area, so one stalled service fills only its share and every other
  // endpoint sharing the channel keeps the rest (its senders get Busy; with
  // the endpoint window they wait at their own daemon first).
  auto proxy = proxies_.find(h.dst_ep);
  const std::uint64_t share = std::max<std::uint64_t>(config_.staging_bytes / kStagingShares, h.payload_len);
  if (staged_bytes_ + h.payload_len > config_.staging_bytes ||
      (proxy != proxies_.end() && proxy->second.staged_bytes + h.payload_len > share)) {
    bump(counters_.busy_rejects);
    if (proxy != proxies_.end() && h.seq != 0) proxy->second.refused_from = h.seq;
    answer(channel, lane, h, Status::Busy);
    return;
  }
  StagedDelivery sd;
  sd.channel = channel;
  sd.lane = lane;
  sd.header = h;
  sd.payload.assign(payload, payload + h.payload_len);
  sd.deadline_ns = waiting_deadline(call_deadline_ns);
  sd.call_deadline_ns = call_deadline_ns;
  staged_bytes_ += h.payload_len;
  staged_.push_back(std::move(sd));
  if (proxy != proxies_.end()) {
    ++proxy->second.staged;
    proxy->second.staged_bytes += h.payload_len;
  }
  bump(counters_.staged);
}

std::size_t Engine::retry_staged() {
  if (staged_.empty()) return 0;
  std::size_t progress = 0;
  const std::uint64_t now = now_ns();
  blocked_proxies_.clear();
  for (auto it = staged_.begin(); it != staged_.end();) {
    const StagedDelivery& sd = *it;
    const std::uint32_t proxy = sd.header.dst_ep;
    auto p = proxies_.find(proxy);
    const bool behind_reads = p != proxies_.end() && p->second.channel == sd.channel && p->second.reading != 0 &&
                              sd.header.type != wire::MsgType::RendezvousReq;
    if (behind_reads || std::find(blocked_proxies_.begin(), blocked_proxies_.end(), proxy) != blocked_proxies_.end()) {
      if (behind_reads) blocked_proxies_.push_back(proxy);
      ++it;
      continue;
    }
    Status failure = Status::Ok;
    Delivery d = deliver_remote(sd.channel, sd.lane, sd.header, sd.payload.data(), &failure, sd.call_deadline_ns);
    if (d == Delivery::Blocked && now >= sd.deadline_ns) {
      bump(counters_.timeouts);
      failure = Status::Timeout;
      d = Delivery::Failed;
    }
    if (d == Delivery::Blocked) {
      blocked_proxies_.push_back(proxy);
      ++it;
      continue;
    }
    if (d == Delivery::Done && sd.header.type == wire::MsgType::Send)
      answer(sd.channel, sd.lane, sd.header, Status::Ok);
    if (d == Delivery::Failed) answer(sd.channel, sd.lane, sd.header, failure);
    if (auto q = proxies_.find(proxy); q != proxies_.end() && q->second.staged != 0) {
      --q->second.staged;
      q->second.staged_bytes -= std::min<std::uint64_t>(q->second.staged_bytes, sd.header.payload_len);
    }
    staged_bytes_ -= sd.header.payload_len;
    it = staged_.erase(it);
    ++progress;
  }
  return progress;
}

}  // namespace ferry::daemon
