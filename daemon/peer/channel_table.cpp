#include "daemon/peer/channel_table.h"

namespace ferry::daemon::peer {

Channel& ChannelTable::add(std::unique_ptr<Channel> ch) {
  ch->id = next_id_++;
  Channel& ref = *ch;
  channels_.emplace(ref.id, std::move(ch));
  return ref;
}

Channel* ChannelTable::route(std::uint32_t id) noexcept {
  Channel* ch = find(id);
  for (int hops = 0; ch != nullptr && ch->superseded_by != 0 && hops < 4; ++hops) ch = find(ch->superseded_by);
  if (ch == nullptr || ch->state != ChannelState::Up || ch->evicting) return nullptr;
  return ch;
}

Channel* ChannelTable::successor(const Channel& ch) noexcept {
  if (Channel* w = route(ch.id); w != nullptr && w != &ch) return w;
  Channel* best = nullptr;
  for (auto& [id, o] : channels_) {
    if (o.get() == &ch || o->finished() || o->state == ChannelState::Draining) continue;
    const bool same_peer =
        (ch.peer_epoch != 0 && o->peer_epoch == ch.peer_epoch) || (!ch.address.empty() && o->address == ch.address);
    if (!same_peer) continue;
    if (o->state == ChannelState::Up) return o.get();
    best = o.get();
  }
  return best;
}

}  // namespace ferry::daemon::peer
