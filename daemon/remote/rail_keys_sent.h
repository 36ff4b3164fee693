// Several rails, the exposing side of the peer key table (peer_keys.h):
// which client tx arenas this daemon has announced (RailKeys) on which
// lanes of which channel. An arena is announced on a lane before the first
// request on that lane that carries one of its keys, so the peer has taken
// it in (lanes deliver in order, replays included) before it sees a
// request it would use it for. Forgotten when the client detaches (its MRs
// are deregistered with the session, so the keys the peer still holds for
// that range grant nothing) and when the channel ends. Engine thread only.
#pragma once

#include <cstdint>
#include <unordered_map>

namespace ferry::daemon {

class RailKeysSent {
 public:
  bool sent(std::uint32_t client, std::uint32_t channel, std::uint32_t lane) const noexcept {
    auto it = lanes_.find(key(client, channel));
    return it != lanes_.end() && (it->second & bit(lane)) != 0;
  }
  void mark(std::uint32_t client, std::uint32_t channel, std::uint32_t lane) {
    lanes_[key(client, channel)] |= bit(lane);
  }
  void client_gone(std::uint32_t client) noexcept {
    std::erase_if(lanes_, [client](const auto& kv) { return (kv.first >> 32) == client; });
  }
  void channel_down(std::uint32_t channel) noexcept {
    std::erase_if(lanes_, [channel](const auto& kv) { return static_cast<std::uint32_t>(kv.first) == channel; });
  }
  std::size_t size() const noexcept { return lanes_.size(); }

 private:
  static std::uint64_t key(std::uint32_t client, std::uint32_t channel) noexcept {
    return std::uint64_t{client} << 32 | channel;
  }
  static std::uint32_t bit(std::uint32_t lane) noexcept { return 1u << (lane & 31); }
  std::unordered_map<std::uint64_t, std::uint32_t> lanes_;  // (client, channel) -> lanes announced on
};

}  // namespace ferry::daemon
