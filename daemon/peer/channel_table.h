// The channels of one engine, by id, with the two lookups completions and
// Opens need beside them (peer_index.h): which channel a connection belongs
// to, and which channel (and redial wait) an address has. The
// ChannelManager owns one and keeps no channel anywhere else.
//
// A channel's life in the table: add() gives it the next id (never reused
// while the daemon runs); it ends (Down or Failed) in the middle of a turn
// while completions and events may still name it, so retire() only marks
// it, and reap() erases the marked ones when the turn is over. find()
// sees a retired channel until then (finished() says it ended); route()
// does not. Engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/peer/channel.h"
#include "daemon/peer/peer_index.h"

namespace ferry::daemon::peer {

class ChannelTable {
 public:
  using Map = std::unordered_map<std::uint32_t, std::unique_ptr<Channel>>;

  explicit ChannelTable(bool split) : conns_(split) { channels_.reserve(64); }

  // Takes `ch`, gives it the next id, and returns it.
  Channel& add(std::unique_ptr<Channel> ch);
  Channel* find(std::uint32_t id) noexcept {
    auto it = channels_.find(id);
    return it == channels_.end() ? nullptr : it->second.get();
  }
  // The channel new work for `id` should use: a superseded duplicate
  // forwards to its winner; nullptr unless that one is Up and not being
  // evicted.
  Channel* route(std::uint32_t id) noexcept;
  // Where the Opens of `ch`, going down, should go instead: its winner if
  // it lost a duplicate race, else another live channel to the same peer
  // (same epoch or address; Up preferred, Handshaking accepted). nullptr
  // when the peer has no other channel.
  Channel* successor(const Channel& ch) noexcept;

  // `id` ended: erased by the next reap().
  void retire(std::uint32_t id) { retired_.push_back(id); }
  bool has_retired() const noexcept { return !retired_.empty(); }
  // Erases the retired channels, calling `gone(id)` for each first.
  template <typename Gone>
  void reap(Gone&& gone) {
    for (std::uint32_t id : retired_) {
      gone(id);
      channels_.erase(id);
    }
    retired_.clear();
  }

  bool empty() const noexcept { return channels_.empty(); }
  std::size_t size() const noexcept { return channels_.size(); }
  Map::iterator begin() noexcept { return channels_.begin(); }
  Map::iterator end() noexcept { return channels_.end(); }
  Map::const_iterator begin() const noexcept { return channels_.begin(); }
  Map::const_iterator end() const noexcept { return channels_.end(); }

  AddressBook& addresses() noexcept { return by_address_; }
  ConnTable& conns() noexcept { return conns_; }

 private:
  std::uint32_t next_id_ = 1;
  Map channels_;
  std::vector<std::uint32_t> retired_;
  AddressBook by_address_;
  ConnTable conns_;
};

}  // namespace ferry::daemon::peer
