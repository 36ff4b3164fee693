// ReceivePool's configuration check (the rest is inline: receive_pool.h).
#include "daemon/peer/receive_pool.h"

#include "transport/wire/handshake.h"

namespace ferry::daemon::peer {

namespace {

Error bad(std::string why) { return Error::bad_request(std::move(why)); }

}  // namespace

Error ReceivePool::check(const ReceivePoolConfig& c) {
  if (c.floor < kMinFloor) return bad("a lane's credit floor must be at least " + std::to_string(kMinFloor));
  if (c.floor > wire::kMaxInitialCredits)
    return bad("a lane's credit floor must be at most " + std::to_string(wire::kMaxInitialCredits));
  if (c.share < c.floor)
    return bad("the credit share (" + std::to_string(c.share) + ") must be at least the floor (" +
               std::to_string(c.floor) + ")");
  if (c.connections == 0) return bad("the lane transport holds no connection");
  if (std::uint64_t{c.connections} * c.floor > c.receives)
    return bad("a receive pool of " + std::to_string(c.receives) + " cannot reserve the floor of " +
               std::to_string(c.floor) + " for each of " + std::to_string(c.connections) + " connections (needs " +
               std::to_string(std::uint64_t{c.connections} * c.floor) + ")");
  return {};
}

}  // namespace ferry::daemon::peer
