// Receive credits on an engine's channel lanes, the part the manager does
// not hand to each Lane (lane.h): the pool the lanes lend from
// (receive_pool.h), sized once from the lane transport and the
// configuration; what our handshake offers (each lane's initial grant, and
// whether we lend from a pool); when a lane owes its peer an explicit
// Credit; and, after the lane transport reposted receives, the lanes that
// now owe one. Engine thread only.
#pragma once

#include <cstdint>

#include "daemon/peer/channel_table.h"
#include "daemon/peer/receive_pool.h"
#include "transport/transport.h"
#include "transport/wire/handshake.h"

namespace ferry::daemon::peer {

struct CreditConfig {
  // 0: the lane transport's recv_depth per connection, granted back one
  // for one (no lending); else the floor each lane keeps.
  std::uint32_t floor = 0;
  std::uint32_t share = 128;      // what a busy lane may hold
  std::uint32_t receives = 1024;  // the pool when the transport has none of its own (tcp: a budget)
};

class ChannelCredits {
 public:
  // Throws std::invalid_argument for a pool that cannot work (start-up only).
  ChannelCredits(const transport::TransportCaps& caps, const CreditConfig& cfg);

  ReceivePool& pool() noexcept { return pool_; }
  const ReceivePool& pool() const noexcept { return pool_; }

  // Our handshake's credits: the initial grant per lane (the pool's
  // floor) and, when lanes lend beyond it, kCapCreditPool.
  void offer(wire::Handshake& hs) const noexcept;
  // Whether the lanes of a channel to `remote` lend from pools on both sides.
  bool pooled(const wire::Handshake& remote) const noexcept {
    return pool_.share() > pool_.floor() && (remote.capabilities & wire::kCapCreditPool) != 0;
  }
  // A lane joined (or rejoined) on the peer's Hello: its credits are the
  // peer's initial grant, less the `sent` handshake messages of ours that
  // used the peer's receives; the Hello used one of ours.
  void accepted(Lane& l, const wire::Handshake& remote, std::uint32_t sent) noexcept {
    l.credits_from(remote.initial_credits, true, sent, pooled(remote));
    reposts_due_ = true;
  }
  // Our lane Hello was answered: the peer's initial grant less our Hello.
  void answered(Lane& l, const wire::Handshake& remote) noexcept {
    l.credits_from(remote.initial_credits, false, 1, pooled(remote));
  }
  // A message arrived on a lane: it used one of our receives.
  void received() noexcept { reposts_due_ = true; }
  // Whether `l` owes its peer an explicit Credit now.
  bool grant_due(const Lane& l) const noexcept { return l.grant_due(grant_threshold_); }
  // After a poll of the lane transport: receives used before it are
  // reposted, so grantable; one-way traffic has nothing to piggyback a
  // grant on, so each lane that owes one posts a Credit.
  void reposted(ChannelTable& channels, std::uint64_t now_ns) noexcept;

 private:
  ReceivePool pool_;
  std::uint32_t initial_grant_ = 2;    // per lane connection: the pool's floor
  std::uint32_t grant_threshold_ = 1;  // owed at which an explicit Credit goes out
  bool reposts_due_ = false;           // some lane used receives since the last lanes poll
};

}  // namespace ferry::daemon::peer
