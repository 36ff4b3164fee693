#include "daemon/remote/rendezvous.h"

#include "daemon/peer/channel_manager.h"
#include "daemon/remote/wr_tag.h"

namespace ferry::daemon {

Rendezvous::Rendezvous(peer::ChannelManager& peers, Sessions& sessions, std::uint32_t max_reads_per_channel)
    : peers_(peers), sessions_(sessions), max_per_channel_(max_reads_per_channel), jobs_(kJobs), live_(kJobs) {
  free_.reserve(kJobs);
  for (std::uint32_t i = kJobs; i-- > 0;) free_.push_back(i);
  per_channel_.reserve(64);
}

bool Rendezvous::can_start(std::uint32_t channel) const noexcept {
  if (free_.empty()) return false;
  auto it = per_channel_.find(channel);
  return it == per_channel_.end() || it->second < max_per_channel_;
}

Outcome Rendezvous::start(peer::Channel& ch, ClientSession& server, const wire::RemoteBuffer& src, const Job& job) {
  const std::uint32_t slot = free_.back();
  const std::uint64_t zc = sessions_.track_wr(server, WrTag::read(slot));
  if (zc == 0) return Outcome::blocked();  // every tracking slot busy: again when WRs complete
  transport::SendWr wr;
  wr.op = transport::WrOp::RdmaRead;
  wr.payload = server.at(job.block.offset);  // the READ's destination
  wr.payload_len = src.length;
  wr.remote = src;
  // Several rails: the source's key on every rail of the peer (its
  // RailKeys); the lane takes the one its connection reaches.
  (void)peers_.peer_keys().fill(ch.id, src, wr.remote_rail_rkey);
  wr.local = server.mr.rx();  // the READ lands in the server's rx arena
  wr.user_data = zc;
  wr.signaled = true;
  const transport::PostResult r = peers_.post(ch, job.lane, wr);
  if (r.accepted != 1) {
    (void)sessions_.wr_done(zc);  // never posted
    return r.status == Status::Busy ? Outcome::blocked() : Outcome::failed(Status::PeerReset);
  }
  free_.pop_back();
  jobs_[slot] = job;
  live_[slot] = true;
  ++per_channel_[ch.id];
  return Outcome::done();
}

std::optional<Rendezvous::Job> Rendezvous::finish(std::uint32_t slot) noexcept {
  if (slot >= jobs_.size() || !live_[slot]) return std::nullopt;
  live_[slot] = false;
  free_.push_back(slot);
  const Job job = jobs_[slot];
  if (auto it = per_channel_.find(job.channel); it != per_channel_.end() && --it->second == 0) per_channel_.erase(it);
  return job;
}

void Rendezvous::fill(peer::PeerInfo& p) const noexcept {
  auto it = per_channel_.find(p.channel);
  p.reads_inflight = it == per_channel_.end() ? 0 : it->second;
}

}  // namespace ferry::daemon
