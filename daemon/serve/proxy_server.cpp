#include "daemon/serve/proxy_server.h"

#include <spdlog/spdlog.h>

#include "daemon/engines/engine_group.h"
#include "daemon/peer/channel_manager.h"

namespace ferry::daemon {

ProxyServer::ProxyServer(const Config& config, peer::ChannelManager& peers, Sessions& sessions, LocalDelivery& local,
                         Calls& calls, Deadlines& deadlines, Counters& counters, EngineFault fault,
                         const EngineGroup& group, std::uint32_t engine)
    : peers_(peers),
      group_(group),
      engine_(engine),
      sessions_(sessions),
      local_(local),
      calls_(calls),
      deadlines_(deadlines),
      counters_(counters),
      staging_limit_(config.staging_bytes),
      max_message_bytes_(config.max_message_bytes),
      large_bytes_(config.engine_spin_bulk_bytes),
      fault_(fault),
      reads_(peers, sessions, counters, config.max_reads_inflight, config.rail_split_bytes) {
  proxies_.reserve(1024);
  blocked_.reserve(256);
}

ProxyServer::Proxy* ProxyServer::proxy_of(std::uint32_t channel, std::uint32_t id) noexcept {
  auto it = proxies_.find(id);
  return it == proxies_.end() || it->second.channel != channel ? nullptr : &it->second;
}

void ProxyServer::answer(std::uint32_t channel, std::uint32_t lane, const wire::Header& to, Status status) noexcept {
  peers_.answer(channel, lane, to.src_ep, to.token, status);
}

void ProxyServer::on_open(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload) {
  const std::string_view name(reinterpret_cast<const char*>(payload), h.payload_len);
  wire::Header ack;
  ack.type = wire::MsgType::OpenAck;
  ack.token = h.token;
  ack.dst_ep = h.src_ep;
  const std::optional<ServiceLocation> at = group_.directory.find(name);
  const Service* s = at && at->engine == engine_ ? local_.services().find(at->id) : nullptr;
  if (at && at->engine != engine_ && group_.ports[at->engine] != 0) {
    // Another engine of ours serves it: the peer opens it there, over the
    // channel of its engine that pairs with that one (open_router.h).
    ack.status = Status::ServiceNotFound;
    ack.flags = wire::kFlagRedirect;
    ack.aux = wire::redirect_aux(at->engine, group_.ports[at->engine]);
  } else if (s == nullptr) {
    ack.status = Status::ServiceNotFound;
  } else {
    std::uint32_t id = next_proxy_id_++;
    while (id == 0 || proxies_.count(id) != 0) id = next_proxy_id_++;
    proxies_[id] = Proxy{ch.id, s->id};
    peers_.bind_endpoint(ch);
    ack.src_ep = id;
  }
  peers_.send_control(ch, lane, ack);  // held while the lane has no room: the peer's Open waits for it
}

void ProxyServer::on_close(peer::Channel& ch, const wire::Header& h) {
  if (proxy_of(ch.id, h.dst_ep) == nullptr) return;
  proxies_.erase(h.dst_ep);
  calls_.proxy_closed(ch.id, h.dst_ep);
  peers_.unbind_endpoint(ch);
}

void ProxyServer::on_delivery(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload) {
  Proxy* p = proxy_of(ch.id, h.dst_ep);
  if (p != nullptr && p->refused_from != 0) {
    // After a Busy, everything later is refused until the refused op itself
    // comes again: the sender resends in order (remote_sender.h). (A sender
    // that gives the refused op up sends its next op with that number.)
    if (h.seq != p->refused_from) {
      bump(counters_.busy_rejects);
      answer(ch.id, lane, h, Status::Busy);
      return;
    }
    p->refused_from = 0;  // stage() sets it again if still full
  }
  if (h.type == wire::MsgType::Call && fault_.forget_this_call()) {
    spdlog::warn("engine: FAULT INJECTED: remote Call #{} (token {:#x}, channel {}) forgotten: no delivery, no answer",
                 fault_.calls_seen, h.token, ch.id);
    return;
  }
  // A Call's timeout counts from here: time staged or being READ counts.
  const std::uint64_t call_deadline = deadlines_.after(wire::call_timeout_ms(h));
  // Keep one sender's order: behind what waits, and eager ones behind READs.
  if (p != nullptr && (p->staged != 0 || (p->reading != 0 && h.type != wire::MsgType::RendezvousReq))) {
    stage(ch.id, lane, h, payload, call_deadline);
    return;
  }
  const Outcome o = deliver(ch.id, lane, h, payload, call_deadline);
  if (o.is_done() && h.type == wire::MsgType::Send) answer(ch.id, lane, h, Status::Ok);
  if (o.is_blocked()) stage(ch.id, lane, h, payload, call_deadline);
  if (o.is_failed()) answer(ch.id, lane, h, o.status);
}

Outcome ProxyServer::deliver(std::uint32_t channel, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
                             std::uint64_t call_deadline_ns) {
  if (h.type == wire::MsgType::RendezvousReq) {
    peer::Channel* ch = peers_.find(channel);
    if (ch == nullptr || !ch->usable()) return Outcome::failed(Status::PeerReset);
    return start_read(*ch, lane, h, payload, call_deadline_ns);
  }
  Proxy* p = proxy_of(channel, h.dst_ep);
  if (p == nullptr) return Outcome::failed(Status::EndpointClosed);
  const Service* s = local_.services().find(p->service_id);
  if (s == nullptr) return Outcome::failed(Status::ServiceGone);
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
      return Outcome::failed(Status::BadRequest);
    }
    payload += wire::kRemoteBufferBytes;
    length -= wire::kRemoteBufferBytes;
  }
  const Outcome o =
      local_.deliver(*s, h.type == wire::MsgType::Call, payload, length, kRemoteSourceBit | h.dst_ep, call);
  if (o.is_done()) bump(counters_.remote_delivered);
  return o;
}

Outcome ProxyServer::start_read(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
                                std::uint64_t call_deadline_ns) {
  // The header rules (wire/header.cpp) fixed the payload: 1 or 2 descriptors.
  wire::RemoteBuffer src{};
  Rendezvous::Job job;
  if (wire::decode_remote_buffer(std::span<const std::byte>(payload, wire::kRemoteBufferBytes), src) !=
          wire::WireError::None ||
      ((h.flags & wire::kFlagRespBuffer) != 0 &&
       wire::decode_remote_buffer(
           std::span<const std::byte>(payload + wire::kRemoteBufferBytes, wire::kRemoteBufferBytes), job.resp) !=
           wire::WireError::None)) {
    return Outcome::failed(Status::BadRequest);
  }
  Proxy* p = proxy_of(ch.id, h.dst_ep);
  if (p == nullptr) return Outcome::failed(Status::EndpointClosed);
  const Service* s = local_.services().find(p->service_id);
  if (s == nullptr) return Outcome::failed(Status::ServiceGone);
  // The sender's daemon has the same limit: a peer that ignores it.
  if (src.length > max_message_bytes_) return Outcome::failed(Status::BadRequest);
  if (!reads_.can_start(ch.id)) return Outcome::blocked();
  const LocalDelivery::Reservation r = local_.reserve(*s, src.length);
  if (!r.outcome.is_done()) return r.outcome;
  auto unreserve = [&] { (void)r.server->rx.free(r.block.offset); };  // a block we just allocated
  // Cannot happen on rdma (attach registers or refuses); never READ into the void.
  if (!r.server->mr.valid()) {
    unreserve();
    return Outcome::failed(Status::NotSupported);
  }
  job.channel = ch.id;
  job.lane = lane;
  job.header = h;
  job.server = r.server->id();
  job.service = s->id;
  job.block = r.block;
  job.length = src.length;
  job.call_deadline_ns = call_deadline_ns;
  const Outcome o = reads_.start(ch, *r.server, src, job, deadlines_.now());
  if (!o.is_done()) {
    unreserve();
    return o;
  }
  ++p->reading;
  if (large_bytes_ != 0 && src.length >= large_bytes_) ++large_started_;
  return o;
}

void ProxyServer::on_read_done(std::uint32_t slot, std::uint32_t chunk, Status chunk_status) {
  const std::optional<Rendezvous::Job> done = reads_.finish(slot, chunk, chunk_status, deadlines_.now());
  if (!done) return;  // other chunks of a split READ still under way
  const Rendezvous::Job& job = *done;
  const Status status = job.status;  // the first failure among its chunks
  Proxy* p = proxy_of(job.channel, job.header.dst_ep);
  if (p != nullptr && p->reading != 0) --p->reading;
  ClientSession* server = sessions_.find(job.server);
  const Service* s = local_.services().find(job.service);
  Status failure = status != Status::Ok ? Status::PeerReset : Status::Ok;
  if (failure == Status::Ok && p == nullptr) failure = Status::EndpointClosed;
  if (failure == Status::Ok && (server == nullptr || server->doomed || s == nullptr || s->owner != job.server)) {
    failure = Status::ServiceGone;
  }
  if (failure != Status::Ok) {
    if (server != nullptr) (void)server->rx.free(job.block.offset);  // its own block: cannot be refused
    answer(job.channel, job.lane, job.header, failure);
    return;
  }
  const bool is_call = wire::rendezvous_kind(job.header) == wire::MsgType::Call;
  PendingCall call;
  call.endpoint = job.header.dst_ep;
  call.remote_channel = job.channel;
  call.remote_ep = job.header.src_ep;
  call.lane = job.lane;
  call.remote_token = job.header.token;
  call.resp_remote = job.resp;
  call.deadline_ns = job.call_deadline_ns;
  local_.publish(*server, *s, is_call, job.block, job.length, kRemoteSourceBit | job.header.dst_ep, call);
  bump(counters_.remote_delivered);
  bump(counters_.rendezvous_reads);
  if (!is_call) answer(job.channel, job.lane, job.header, Status::Ok);
}

void ProxyServer::channel_down(std::uint32_t channel) {
  // The peer's proxies here and its staged deliveries; its calls being
  // served wait for replies that get CallerGone (calls.h).
  std::erase_if(proxies_, [channel](const auto& kv) { return kv.second.channel == channel; });
  for (auto it = staged_.begin(); it != staged_.end();) {
    if (it->channel == channel) {
      staged_bytes_ -= it->header.payload_len;
      it = staged_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace ferry::daemon
