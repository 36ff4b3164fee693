#include "daemon/remote/send_windows.h"

#include <algorithm>

#include "daemon/peer/channel_manager.h"

namespace ferry::daemon {

SendWindows::SendWindows(const Config& config) noexcept
    : endpoint_ops_(config.endpoint_window_ops),
      channel_ops_(config.channel_window_ops),
      channel_bytes_(config.channel_window_bytes),
      nic_bytes_limit_(config.nic_window_bytes) {
  channels_.reserve(64);
}

bool SendWindows::open(std::uint32_t channel, const RemoteLink& ep, std::uint32_t bytes) const noexcept {
  if (endpoint_ops_ != 0 && ep.inflight >= endpoint_ops_) return false;
  auto it = channels_.find(channel);
  const std::uint32_t ops = it == channels_.end() ? 0 : it->second.ops;
  const std::uint64_t used = it == channels_.end() ? 0 : it->second.bytes;
  if (channel_ops_ != 0 && ops >= channel_ops_) return false;
  if (channel_bytes_ != 0 && ops != 0 && used + bytes > channel_bytes_) return false;
  if (nic_bytes_limit_ != 0 && nic_ops_ != 0 && nic_bytes_ + bytes > nic_bytes_limit_) return false;
  return true;
}

bool SendWindows::stalled(std::uint32_t channel, bool& counted) noexcept {
  if (counted) return false;  // retries of a waiting op are not new stalls
  counted = true;
  ++channels_[channel].stalls;
  return true;
}

void SendWindows::charge(std::uint32_t channel, std::uint32_t lane, RemoteLink& ep, std::uint32_t bytes) noexcept {
  Channel& ch = channels_[channel];
  ++ch.ops;
  ch.bytes += bytes;
  ++ch.lane_ops[lane % peer::kMaxLanes];
  ++nic_ops_;
  nic_bytes_ += bytes;
  ++ep.inflight;
}

void SendWindows::release(std::uint32_t channel, std::uint32_t lane, RemoteLink* ep, std::uint32_t bytes) noexcept {
  if (auto it = channels_.find(channel); it != channels_.end()) {
    Channel& ch = it->second;
    if (ch.ops != 0) --ch.ops;
    ch.bytes -= std::min<std::uint64_t>(ch.bytes, bytes);
    std::uint32_t& l = ch.lane_ops[lane % peer::kMaxLanes];
    if (l != 0) --l;
  }
  if (nic_ops_ != 0) --nic_ops_;
  nic_bytes_ -= std::min<std::uint64_t>(nic_bytes_, bytes);
  if (ep != nullptr && ep->inflight != 0) --ep->inflight;
}

void SendWindows::channel_down(std::uint32_t channel) noexcept { channels_.erase(channel); }

void SendWindows::fill(peer::PeerInfo& p) const noexcept {
  auto it = channels_.find(p.channel);
  if (it == channels_.end()) return;
  p.window_ops = it->second.ops;
  p.window_bytes = it->second.bytes;
  p.window_stalls = it->second.stalls;
  for (std::uint32_t i = 0; i < p.lane_count && i < peer::kMaxLanes; ++i) p.lanes[i].inflight = it->second.lane_ops[i];
}

}  // namespace ferry::daemon
