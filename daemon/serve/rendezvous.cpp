#include "daemon/serve/rendezvous.h"

#include <algorithm>

#include "daemon/peer/channel_manager.h"
#include "daemon/remote/wr_tag.h"

namespace ferry::daemon {

Rendezvous::Rendezvous(peer::ChannelManager& peers, Sessions& sessions, Counters& counters,
                       std::uint32_t max_reads_per_channel, std::uint32_t split_bytes)
    : peers_(peers),
      sessions_(sessions),
      counters_(counters),
      max_per_channel_(max_reads_per_channel),
      split_bytes_(split_bytes),
      jobs_(kJobs),
      parts_(kJobs),
      live_(kJobs) {
  free_.reserve(kJobs);
  for (std::uint32_t i = kJobs; i-- > 0;) free_.push_back(i);
  per_channel_.reserve(64);
}

bool Rendezvous::can_start(std::uint32_t channel) const noexcept {
  if (free_.empty()) return false;
  auto it = per_channel_.find(channel);
  return it == per_channel_.end() || it->second < max_per_channel_;
}

Rendezvous::Plan Rendezvous::plan(peer::Channel& ch, const wire::RemoteBuffer& src,
                                  std::uint32_t request_lane) noexcept {
  Plan p;
  p.count = 1;
  p.lane[0] = request_lane;
  p.rail[0] = peers_.rail_of_lane(ch.id, request_lane);
  p.bytes[0] = src.length;
  // Several rails, a large READ, and the peer's keys for the source.
  if (split_bytes_ == 0 || src.length < split_bytes_ || peers_.rail_count() < 2 ||
      !peers_.peer_keys().fill(ch.id, src, p.rkeys)) {
    return p;
  }
  for (std::uint32_t l = 0; l < ch.lane_count && p.count < kMaxChunks; ++l) {
    const peer::Lane& lane = ch.lanes[l];
    if (l == request_lane || !lane.joined() || lane.broken() || !peers_.has_room(ch, l)) continue;
    // Its connection must reach a rail of the peer we hold a key of.
    if (lane.peer_rail() >= p.rkeys.size() || p.rkeys[lane.peer_rail()] == 0) continue;
    const std::uint32_t rail = peers_.rail_of_lane(ch.id, l);
    if (std::find(p.rail.begin(), p.rail.begin() + p.count, rail) != p.rail.begin() + p.count) continue;
    p.lane[p.count] = l;
    p.rail[p.count] = rail;
    ++p.count;
  }
  if (p.count < 2) {
    p.count = 1;
    return p;
  }
  // Shares by measured throughput once every chosen rail has a figure.
  std::array<double, kMaxChunks> w{};
  double sum = 0;
  bool measured_all = true;
  for (std::uint32_t i = 0; i < p.count; ++i) measured_all = measured_all && rate_[p.rail[i]] > 0;
  for (std::uint32_t i = 0; i < p.count; ++i) sum += w[i] = measured_all ? rate_[p.rail[i]] : 1.0;
  std::uint32_t n = 0, at = 0;
  for (std::uint32_t i = 0; i < p.count; ++i) {
    std::uint32_t bytes = src.length - at;  // the last one: the rest
    if (i + 1 < p.count) {
      const auto share = static_cast<std::uint64_t>(static_cast<double>(src.length) * (w[i] / sum));
      bytes = static_cast<std::uint32_t>(std::min<std::uint64_t>(share / kChunkAlign * kChunkAlign, bytes));
    }
    if (bytes == 0) continue;  // a rail too slow for a share of this one
    p.lane[n] = p.lane[i];
    p.rail[n] = p.rail[i];
    p.offset[n] = at;
    p.bytes[n] = bytes;
    at += bytes;
    ++n;
  }
  p.count = n;
  return p;
}

Outcome Rendezvous::start(peer::Channel& ch, ClientSession& server, const wire::RemoteBuffer& src, const Job& job,
                          std::uint64_t now_ns) {
  const std::uint32_t slot = free_.back();
  const Plan p = plan(ch, src, job.lane);
  // Every chunk's tracking slot first: a READ goes whole or not at all.
  std::array<std::uint64_t, kMaxChunks> zc{};
  for (std::uint32_t i = 0; i < p.count; ++i) {
    zc[i] = sessions_.track_wr(server, WrTag::read(slot, i));
    if (zc[i] == 0) {
      for (std::uint32_t j = 0; j < i; ++j) (void)sessions_.wr_done(zc[j]);
      return Outcome::blocked();  // every tracking slot busy: again when WRs complete
    }
  }
  Parts& parts = parts_[slot];
  parts = {};
  for (std::uint32_t i = 0; i < p.count; ++i) {
    transport::SendWr wr;
    wr.op = transport::WrOp::RdmaRead;
    wr.payload = server.at(job.block.offset) + p.offset[i];  // the READ's destination
    wr.payload_len = p.bytes[i];
    wr.remote = wire::RemoteBuffer{src.addr + p.offset[i], src.rkey, p.bytes[i]};
    wr.local = server.mr.rx();  // the READ lands in the server's rx arena
    wr.user_data = zc[i];
    wr.signaled = true;
    // Several rails: the source's key on every rail of the peer (its
    // RailKeys); the lane takes the one its connection reaches.
    if (p.count > 1) {
      wr.remote_rail_rkey = p.rkeys;
    } else {
      (void)peers_.peer_keys().fill(ch.id, src, wr.remote_rail_rkey);
    }
    const transport::PostResult r = peers_.post(ch, p.lane[i], wr);
    if (r.accepted != 1) {
      for (std::uint32_t j = i; j < p.count; ++j) (void)sessions_.wr_done(zc[j]);  // never posted
      if (i == 0) return r.status == Status::Busy ? Outcome::blocked() : Outcome::failed(Status::PeerReset);
      // Some chunks went: the job completes when they have, failed (its
      // lanes had room a moment ago; only a channel going down refuses).
      break;
    }
    parts.chunk[i] = Chunk{p.rail[i], p.bytes[i], now_ns, false};
    ++parts.count;
  }
  parts.left = parts.count;
  const Status failed_early = parts.count < p.count ? Status::PeerReset : Status::Ok;
  free_.pop_back();
  jobs_[slot] = job;
  jobs_[slot].status = failed_early;
  live_[slot] = true;
  ++per_channel_[ch.id];
  if (parts.count > 1) {
    bump(counters_.split_reads);
    bump(counters_.split_read_chunks, parts.count);
  }
  return Outcome::done();
}

void Rendezvous::measured(std::uint32_t rail, std::uint32_t bytes, std::uint64_t elapsed_ns) noexcept {
  // The engine's clock is read once per turn: a READ done in the turn that
  // posted it has no time to speak of, and would weigh its rail without bound.
  if (rail >= rate_.size() || elapsed_ns == 0) return;
  const double sample = static_cast<double>(bytes) / static_cast<double>(elapsed_ns);
  rate_[rail] = rate_[rail] == 0 ? sample : 0.75 * rate_[rail] + 0.25 * sample;
}

std::optional<Rendezvous::Job> Rendezvous::finish(std::uint32_t slot, std::uint32_t chunk, Status status,
                                                  std::uint64_t now_ns) noexcept {
  if (slot >= jobs_.size() || !live_[slot]) return std::nullopt;
  Parts& parts = parts_[slot];
  if (chunk >= parts.count || parts.chunk[chunk].done) return std::nullopt;  // not ours, or told already
  Chunk& c = parts.chunk[chunk];
  c.done = true;
  if (status == Status::Ok) {
    measured(c.rail, c.bytes, now_ns - c.posted_ns);
  } else if (jobs_[slot].status == Status::Ok) {
    jobs_[slot].status = status;
  }
  if (--parts.left != 0) return std::nullopt;
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
