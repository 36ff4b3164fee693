// The lookups kept beside the channels by id: which channel a connection
// belongs to and which channel (and redial wait) an address has (both
// held by the ChannelTable), and (auth) the Challenge each accepted
// connection was sent (held by the ChannelHandshake).
// Engine thread only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "transport/transport.h"
#include "transport/wire/handshake.h"

namespace ferry::daemon::peer {

// Connections of the bootstrap transport and of the lane transport, in one
// key space even when the two transports are separate.
constexpr std::uint64_t conn_key(bool split, transport::ConnId c, bool on_lanes) noexcept {
  return (split && on_lanes ? std::uint64_t{1} << 32 : 0) | c;
}

class ConnTable {
 public:
  struct Ref {
    std::uint32_t channel = 0;  // 0: accepted, no Hello yet
    std::int32_t lane = -1;     // -1: the bootstrap connection
  };
  explicit ConnTable(bool split) : split_(split) { refs_.reserve(256); }
  void set(transport::ConnId c, bool on_lanes, Ref r) { refs_[key(c, on_lanes)] = r; }
  // nullptr: not (or no longer) ours.
  const Ref* find(transport::ConnId c, bool on_lanes) const noexcept {
    auto it = refs_.find(key(c, on_lanes));
    return it == refs_.end() ? nullptr : &it->second;
  }
  void erase(transport::ConnId c, bool on_lanes) noexcept { refs_.erase(key(c, on_lanes)); }

 private:
  std::uint64_t key(transport::ConnId c, bool on_lanes) const noexcept { return conn_key(split_, c, on_lanes); }
  bool split_;
  std::unordered_map<std::uint64_t, Ref> refs_;
};

// Acceptor with auth: the Challenge nonce sent on each accepted connection
// (daemon/peer/hello_proof.h), until its Closed: the posted WR points at
// it, and the connection's lane Hello must prove over it.
class Challenges {
 public:
  explicit Challenges(bool split) : split_(split) {}
  // The slot for a new connection's nonce (stable until erase()).
  wire::AuthNonce& add(transport::ConnId c, bool on_lanes) { return nonces_[conn_key(split_, c, on_lanes)]; }
  // nullptr: none was sent on it.
  const wire::AuthNonce* find(transport::ConnId c, bool on_lanes) const noexcept {
    auto it = nonces_.find(conn_key(split_, c, on_lanes));
    return it == nonces_.end() ? nullptr : &it->second;
  }
  void erase(transport::ConnId c, bool on_lanes) noexcept { nonces_.erase(conn_key(split_, c, on_lanes)); }

 private:
  bool split_;
  std::unordered_map<std::uint64_t, wire::AuthNonce> nonces_;
};

// Redial rate limit per address: after a channel we dialled fails, the next
// dial waits delay_ns; it doubles (100 ms .. 2 s) while dials keep failing
// before Up and is forgotten once a channel comes Up. Opens in the wait fail
// PeerUnreachable at once, so a dead or flapping peer costs one connect per
// interval, not one per Open.
struct Redial {
  std::uint64_t not_before_ns = 0;
  std::uint64_t delay_ns = 0;
  bool waits(std::uint64_t now_ns) const noexcept { return now_ns < not_before_ns; }
  // A channel that was Up and died: one quick retry interval. One that never
  // came up: the interval doubles with each failure in a row.
  void defer(bool was_up, std::uint64_t now_ns) noexcept {
    constexpr std::uint64_t kMinNs = 100'000'000, kMaxNs = 2'000'000'000;
    delay_ns = was_up ? kMinNs : std::clamp(delay_ns * 2, kMinNs, kMaxNs);
    not_before_ns = now_ns + delay_ns;
  }
};

// By HOST:PORT: the channel later Opens to that address join (0: none) and
// its redial wait. An entry with neither is dropped.
class AddressBook {
 public:
  struct Entry {
    std::uint32_t channel = 0;
    Redial redial;
    bool evicted = false;  // its last channel was evicted: the next one counts as a re-open
  };
  Entry* find(const std::string& address) noexcept {
    auto it = entries_.find(address);
    return it == entries_.end() ? nullptr : &it->second;
  }
  Entry& at(const std::string& address) { return entries_[address]; }
  // The address now routes to `channel` (0: to none).
  void route(const std::string& address, std::uint32_t channel) {
    if (channel != 0) {
      entries_[address].channel = channel;
      return;
    }
    if (Entry* e = find(address)) {
      e->channel = 0;
      tidy(address, *e);
    }
  }
  // Routes to `channel` unless the address already has a channel.
  void route_if_free(const std::string& address, std::uint32_t channel) {
    Entry& e = entries_[address];
    if (e.channel == 0) e.channel = channel;
  }
  // A channel came Up: the address's dials are no longer deferred.
  void forget_redial(const std::string& address) noexcept {
    if (Entry* e = find(address)) {
      e->redial = Redial{};
      tidy(address, *e);
    }
  }

 private:
  void tidy(const std::string& address, const Entry& e) noexcept {
    if (e.channel == 0 && e.redial.delay_ns == 0 && !e.evicted) entries_.erase(address);
  }
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace ferry::daemon::peer
