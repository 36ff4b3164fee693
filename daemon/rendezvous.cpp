// The receiving side of large messages over rdma (rendezvous): a
// RendezvousReq names the sender's buffer; this daemon reserves a block in
// its server's rx arena, RDMA-READs the payload straight into it (no copy
// through daemon memory) and then delivers it like an eager message: a
// Message (and the Send's Response) or a Request (whose reply may go back by
// RDMA WRITE with immediate, calls.cpp).
//
// Bounds: at most max-reads-inflight READs per channel (the NIC's outstanding
// READ limit is per QP and small; more would only queue in the NIC) and one
// job slot each; past them, or while the server's rx arena is full, the
// request waits in staged_ (a 16-32 byte descriptor, never the payload) in
// arrival order. A proxy's eager messages wait behind its READs, so one
// sender's messages keep their order whatever their sizes (READs on one QP
// complete in order).
//
// Memory lifetime: the READ's local SGE names the server's MR, so the WR is
// tracked like a zero-copy send (zc_track: a detached server stays retired
// until it completes); the sender's buffer is held by its daemon until our
// Response (remote_send.cpp).
#include <spdlog/spdlog.h>

#include "daemon/engine.h"
#include "transport/wire/remote_buffer.h"

namespace ferry::daemon {

namespace {

constexpr std::uint32_t kReadJobs = 1024;  // READs in flight over all channels

}  // namespace

void Engine::setup_rendezvous() {
  reads_.assign(kReadJobs, ReadJob{});
  reads_free_.reserve(kReadJobs);
  for (std::uint32_t i = kReadJobs; i-- > 0;) reads_free_.push_back(i);
}

Engine::Delivery Engine::start_read(peer::Channel& ch, std::uint32_t lane, const wire::Header& h,
                                    const std::byte* payload, Status* failure, std::uint64_t call_deadline_ns) {
  // The header rules (wire/header.cpp) fixed the payload: 1 or 2 descriptors.
  wire::RemoteBuffer src{};
  wire::RemoteBuffer resp{};
  if (wire::decode_remote_buffer(std::span<const std::byte>(payload, wire::kRemoteBufferBytes), src) !=
          wire::WireError::None ||
      ((h.flags & wire::kFlagRespBuffer) != 0 &&
       wire::decode_remote_buffer(
           std::span<const std::byte>(payload + wire::kRemoteBufferBytes, wire::kRemoteBufferBytes), resp) !=
           wire::WireError::None)) {
    *failure = Status::BadRequest;
    return Delivery::Failed;
  }
  auto proxy = proxies_.find(h.dst_ep);
  if (proxy == proxies_.end() || proxy->second.channel != ch.id) {
    *failure = Status::EndpointClosed;
    return Delivery::Failed;
  }
  const Service* s = services_.find(proxy->second.service_id);
  if (s == nullptr) {
    *failure = Status::ServiceGone;
    return Delivery::Failed;
  }
  if (src.length > config_.max_message_bytes) {
    *failure = Status::BadRequest;  // the sender's daemon has the same limit: a peer that ignores it
    return Delivery::Failed;
  }
  if (ch.reads_inflight >= config_.max_reads_inflight || reads_free_.empty()) return Delivery::Blocked;
  ClientSession* server = nullptr;
  shm::Block block{};
  const Delivery d = reserve_rx(*s, src.length, &server, &block, failure);
  if (d != Delivery::Done) return d;
  if (!server->mr.valid()) {  // cannot happen on rdma (attach registers or refuses); never READ into the void
    server->rx.free(block.offset);
    *failure = Status::NotSupported;
    return Delivery::Failed;
  }
  const std::uint32_t slot = reads_free_.back();
  const std::uint64_t zc = zc_track(*server, WrTag::read(slot));
  if (zc == 0) {
    server->rx.free(block.offset);
    return Delivery::Blocked;  // every tracking slot busy: retry when WRs complete
  }
  transport::SendWr wr;
  wr.op = transport::WrOp::RdmaRead;
  wr.payload = server->at(block.offset);  // the READ's destination
  wr.payload_len = src.length;
  wr.remote = src;
  wr.local = server->mr.rx();  // the READ lands in the server's rx arena
  wr.user_data = zc;
  wr.signaled = true;
  const auto r = peers_->post(ch, lane, wr);
  if (r.accepted != 1) {
    zc_done(zc);
    server->rx.free(block.offset);
    if (r.status == Status::Busy) return Delivery::Blocked;
    *failure = Status::PeerReset;
    return Delivery::Failed;
  }
  reads_free_.pop_back();
  ReadJob& job = reads_[slot];
  job = ReadJob{ch.id, lane, h, resp, server->id(), s->id, block, src.length, true, call_deadline_ns};
  ++ch.reads_inflight;
  ++proxy->second.reading;
  return Delivery::Done;
}

void Engine::on_read_done(std::uint32_t slot, Status status) {
  if (slot >= reads_.size() || !reads_[slot].live) return;
  const ReadJob job = reads_[slot];
  reads_[slot].live = false;
  reads_free_.push_back(slot);
  if (peer::Channel* ch = peers_->find(job.channel); ch != nullptr && ch->reads_inflight != 0) --ch->reads_inflight;
  auto proxy = proxies_.find(job.header.dst_ep);
  const bool proxy_live = proxy != proxies_.end() && proxy->second.channel == job.channel;
  if (proxy_live && proxy->second.reading != 0) --proxy->second.reading;
  ClientSession* server = client(job.server);
  const Service* s = services_.find(job.service);
  Status failure = status != Status::Ok ? Status::PeerReset : Status::Ok;
  if (failure == Status::Ok && !proxy_live) failure = Status::EndpointClosed;
  if (failure == Status::Ok && (server == nullptr || server->doomed || s == nullptr || s->owner != job.server))
    failure = Status::ServiceGone;
  if (failure != Status::Ok) {
    if (server != nullptr) server->rx.free(job.block.offset);
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
  publish(*server, *s, is_call, job.block, job.length, kRemoteSourceBit | job.header.dst_ep, call);
  bump(counters_.remote_delivered);
  bump(counters_.rendezvous_reads);
  if (!is_call) answer(job.channel, job.lane, job.header, Status::Ok);
}

}  // namespace ferry::daemon
