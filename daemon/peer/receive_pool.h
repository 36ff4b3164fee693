// The receive pool: how many receive credits each lane may grant its peer
// out of one shared pool of receives (rdma: the transport's shared receive
// queue; tcp: a configured budget, so flow control reads the same on both).
// Flow control's first layer (docs/flow-control.md).
//
// The rule that makes an RNR impossible: the credits all peers hold (or
// have on their way to them) never exceed the receives posted. Lanes keep
// their own number, lent (Lane::lent()); the pool keeps the sum of what
// they lend beyond their floor:
//   - every connection the lane transport can hold has `floor` receives
//     reserved for it (connections x floor), so a lane that joins always
//     gets its floor, whatever the others hold; the handshake's
//     initial_credits is that floor;
//   - the rest is shared: a lane borrows from it while active, up to
//     `share` in all, and returns what it borrowed by granting back less
//     than its peer used as it goes idle;
//   - a peer that stops consuming holds at most its share: credits once
//     granted cannot be revoked, but none is granted beyond the share.
// So sum(lent) <= connections x floor + borrowed <= receives. A receive its
// peer used is still counted as lent until the lane transport reposted it
// (Lane::reposted), so the pool never lends a receive that is not posted.
//
// Engine thread only; every call is O(1) and allocates nothing.
#pragma once

#include <cstdint>
#include <string>

#include "ferry/error.h"
#include "ferry/status.h"

namespace ferry::daemon::peer {

struct ReceivePoolConfig {
  std::uint32_t receives = 1024;   // in the pool (rdma: posted on the shared queue)
  std::uint32_t connections = 16;  // the lane transport's connections at once: each has a floor reserved
  std::uint32_t floor = 4;         // a lane's initial grant, always available to it (>= 2: data + reserve)
  std::uint32_t share = 128;       // most a lane lends its peer at once (>= floor)
};

class ReceivePool {
 public:
  // The floor a lane keeps beside the Credit reserve (lane.h): 1 + 1.
  static constexpr std::uint32_t kMinFloor = 2;

  ReceivePool() = default;
  explicit ReceivePool(const ReceivePoolConfig& c) noexcept : cfg_(c) {}

  // Ok when the configuration is usable, else BadRequest and why not
  // (a start-up error).
  static Error check(const ReceivePoolConfig& c);

  const ReceivePoolConfig& config() const noexcept { return cfg_; }
  std::uint32_t floor() const noexcept { return cfg_.floor; }
  std::uint32_t share() const noexcept { return cfg_.share; }
  // Receives lanes may borrow beyond their floors, in all.
  std::uint32_t shared() const noexcept { return cfg_.receives - cfg_.connections * cfg_.floor; }
  std::uint32_t borrowed() const noexcept { return borrowed_; }
  std::uint32_t borrowed_max() const noexcept { return borrowed_max_; }  // high-water mark
  std::uint32_t available() const noexcept { return shared() - borrowed_; }

  // A lane that lends `lent` wants `want` more: how many it may lend now.
  // Up to its floor from its reservation, beyond that from the shared part,
  // never beyond the share. The caller adds the result to its lent.
  [[nodiscard]] std::uint32_t take(std::uint32_t lent, std::uint32_t want) noexcept {
    std::uint32_t target = lent + want;
    if (target > cfg_.share) target = cfg_.share;
    if (target <= lent) return 0;
    const std::uint32_t from = lent > cfg_.floor ? lent : cfg_.floor;  // borrowing starts above the floor
    if (target > from) {
      std::uint32_t borrow = target - from;
      if (borrow > available()) borrow = available();
      borrowed_ += borrow;
      if (borrowed_ > borrowed_max_) borrowed_max_ = borrowed_;
      target = from + borrow;
    }
    return target - lent;
  }
  // A lane's lent fell from `before` to `after` (its peer used receives that
  // are posted again, or its connection is gone: after 0): what it had
  // borrowed beyond its floor goes back to the shared part.
  void give_back(std::uint32_t before, std::uint32_t after) noexcept {
    const std::uint32_t b = before > cfg_.floor ? before - cfg_.floor : 0;
    const std::uint32_t a = after > cfg_.floor ? after - cfg_.floor : 0;
    if (b > a) borrowed_ -= b - a;
  }

 private:
  ReceivePoolConfig cfg_;
  std::uint32_t borrowed_ = 0;  // sum over lanes of max(0, lent - floor)
  std::uint32_t borrowed_max_ = 0;
};

}  // namespace ferry::daemon::peer
