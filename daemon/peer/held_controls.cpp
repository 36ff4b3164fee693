// Control messages held for room (held_controls.h).
#include "daemon/peer/held_controls.h"

#include <algorithm>

#include "daemon/peer/channel_manager.h"

namespace ferry::daemon::peer {

void HeldControls::send(ChannelManager& m, Channel& ch, std::uint32_t lane, const wire::Header& h) noexcept {
  if (!ch.usable()) return;
  const std::uint32_t li = ch.lane_count != 0 ? lane % ch.lane_count : 0;
  // Behind messages of this lane already held: they keep their order.
  const bool waits =
      std::any_of(held_.begin(), held_.end(), [&](const Held& x) { return x.channel == ch.id && x.lane == li; });
  if (!waits && m.has_room(ch, li)) {
    const transport::PostResult r = m.send(ch, li, h, nullptr, 0, 0, false);
    if (r.accepted == 1 || r.status != Status::Busy) return;  // sent, or the channel is ending
  }
  held_.push_back(Held{ch.id, li, h});  // only under back-pressure
  m.count_answer_stall();
}

std::size_t HeldControls::flush(ChannelManager& m) noexcept {
  std::size_t sent = 0;
  blocked_.clear();
  for (auto it = held_.begin(); it != held_.end();) {
    Channel* ch = m.find(it->channel);
    if (ch == nullptr || !ch->usable()) {
      it = held_.erase(it);  // the channel ended: the peer's side of it ended too
      continue;
    }
    // A lane whose earlier message still waits keeps the later ones behind it.
    const std::uint64_t lane_key = (std::uint64_t{it->channel} << 32) | it->lane;
    const bool earlier_waits = std::find(blocked_.begin(), blocked_.end(), lane_key) != blocked_.end();
    if (!earlier_waits && m.has_room(*ch, it->lane)) {
      const transport::PostResult r = m.send(*ch, it->lane, it->header, nullptr, 0, 0, false);
      if (r.accepted == 1 || r.status != Status::Busy) {
        sent += r.accepted;
        it = held_.erase(it);
        continue;
      }
    }
    if (!earlier_waits) blocked_.push_back(lane_key);
    ++it;
  }
  return sent;
}

}  // namespace ferry::daemon::peer
