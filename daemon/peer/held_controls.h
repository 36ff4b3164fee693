// Header-only control messages (answers, OpenAck, Close) that found their
// lane's ring full: held here, in order per lane, and posted by the
// ChannelManager's poll once there is room. Dropped when their channel ends
// first: the peer's side of them ends with the channel too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "transport/wire/header.h"

namespace ferry::daemon::peer {

class ChannelManager;
struct Channel;

class HeldControls {
 public:
  // Posts `h` on the lane now, or holds it behind what the lane already holds.
  void send(ChannelManager& m, Channel& ch, std::uint32_t lane, const wire::Header& h) noexcept;
  // Posts what has room now; returns how many went.
  std::size_t flush(ChannelManager& m) noexcept;
  bool empty() const noexcept { return held_.empty(); }

 private:
  struct Held {
    std::uint32_t channel = 0;
    std::uint32_t lane = 0;
    wire::Header header;
  };
  std::deque<Held> held_;
  std::vector<std::uint64_t> blocked_;  // scratch for flush: lanes whose first held message waits
};

}  // namespace ferry::daemon::peer
