// The software send windows (the third layer of flow control): a remote
// Send or Call counts against its endpoint, its channel and the NIC (every
// channel of the data transport) from its post to its answer, in ops and in
// request bytes. Past any limit the op waits on its endpoint (parking.h),
// so a slow service back-pressures only its own senders while others
// sharing the lanes go on. One op always fits an empty window, however
// large: a window smaller than a message must slow it down, not refuse it.
// The sender's own books: a channel knows nothing of them. Engine thread.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>

#include "daemon/config/config.h"
#include "daemon/peer/channel.h"
#include "daemon/session/client_session.h"

namespace ferry::daemon {

namespace peer {
struct PeerInfo;
}

class SendWindows {
 public:
  explicit SendWindows(const Config& config) noexcept;

  bool open(std::uint32_t channel, const RemoteLink& ep, std::uint32_t bytes) const noexcept;
  // An op waited for room (in a window or its lane): counted once per op,
  // however often it is tried again (`counted` is the op's own flag).
  // true when newly counted.
  bool stalled(std::uint32_t channel, bool& counted) noexcept;
  void charge(std::uint32_t channel, std::uint32_t lane, RemoteLink& ep, std::uint32_t bytes) noexcept;
  // The op was answered or failed; `ep` null when its endpoint is gone.
  void release(std::uint32_t channel, std::uint32_t lane, RemoteLink* ep, std::uint32_t bytes) noexcept;
  void channel_down(std::uint32_t channel) noexcept;
  // The window columns of `ferryctl peers`.
  void fill(peer::PeerInfo& p) const noexcept;

 private:
  struct Channel {
    std::uint32_t ops = 0;
    std::uint64_t bytes = 0;
    std::uint64_t stalls = 0;
    std::array<std::uint32_t, peer::kMaxLanes> lane_ops{};  // ops awaiting an answer per lane
  };
  std::uint32_t endpoint_ops_, channel_ops_;
  std::uint64_t channel_bytes_, nic_bytes_limit_;
  std::unordered_map<std::uint32_t, Channel> channels_;
  std::uint32_t nic_ops_ = 0;
  std::uint64_t nic_bytes_ = 0;
};

}  // namespace ferry::daemon
