// Per-channel table of a peer's tx arenas and their rkeys on each of the
// peer's rails, learned from its RailKeys messages (transport/wire/
// rail_keys.h, docs/rails.md). When this daemon posts an RDMA READ of a
// rendezvous source or an RDMA WRITE into a response buffer, fill() copies
// the keys of the arena holding the buffer into the WR; the lane then uses
// the one of the peer rail its connection reaches (Lane::peer_rail), so a
// request whose key was for the rail its lane left still works after a
// failover. No entry (a one-rail peer, an older build): the request's own
// key, as before.
//
// Bounds: kMaxEntries arenas per channel. An announcement that overlaps
// entries replaces them (the peer's arenas are disjoint at any moment: an
// overlapping one means the old arena is gone); a new one past the bound
// replaces the least recently used. A hostile peer can therefore neither
// grow the table nor do more than pick which of its own keys our READ or
// WRITE carries: the address and length always come from the request, and
// the local side of the WR from our own bookkeeping. Entries of a channel
// go when it ends (forget(), ChannelManager). Engine thread only.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "transport/transport.h"
#include "transport/wire/rail_keys.h"
#include "transport/wire/remote_buffer.h"

namespace ferry::daemon::peer {

class PeerKeyTable {
 public:
  static constexpr std::uint32_t kMaxEntries = 64;
  static_assert(wire::kMaxRailKeys == transport::kMaxRails);

  struct Entry {
    std::uint64_t addr = 0;
    std::uint64_t length = 0;
    std::uint32_t rails = 0;
    std::array<std::uint32_t, transport::kMaxRails> rkey{};
    std::uint64_t used = 0;  // last learn() or fill() (LRU order)
  };

  // Takes a decoded announcement (decode_rail_keys checked its fields)
  // into `channel`'s table. Returns how many entries it replaced.
  std::uint32_t learn(std::uint32_t channel, const wire::RailKeys& rk);
  // The entry of `channel` holding all of [addr, addr + length), if any.
  const Entry* find(std::uint32_t channel, std::uint64_t addr, std::uint64_t length) const noexcept;
  // Copies the keys of the arena holding `rb` into `out` (rail i's key at
  // index i; 0 where none); false (and `out` left alone) without an entry.
  bool fill(std::uint32_t channel, const wire::RemoteBuffer& rb,
            std::array<std::uint32_t, transport::kMaxRails>& out) noexcept;
  // The channel ended: its entries go.
  void forget(std::uint32_t channel) noexcept { tables_.erase(channel); }
  std::uint32_t size(std::uint32_t channel) const noexcept;
  std::size_t channels() const noexcept { return tables_.size(); }

 private:
  std::unordered_map<std::uint32_t, std::vector<Entry>> tables_;
  std::uint64_t clock_ = 0;
};

}  // namespace ferry::daemon::peer
