// Which rails (device + local address) --device names. Control path, sysfs
// only (no verbs), so it is unit-tested against a fake tree.
//
//   --device ""            one rail: the device of the --listen address
//   --device rxe0          one rail on rxe0
//   --device rxe0,rxe1     a rail per device
//   --device rxe0@198.18.0.1,rxe1@198.18.1.1   with their addresses
//   --device all           every device with an IPv4 RoCE v2 GID
//
// A device's address, when not given, is the --listen host if the device
// has its GID, else the device's first IPv4-mapped RoCE v2 GID (port 1).
// The rail whose address is the --listen host comes first (rail 0): the
// bootstrap connection and the handshake run there.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/error.h"

namespace ferry::daemon::rails {

struct RailSpec {
  std::string device;
  std::string address;  // "" only for a single rail left to the transport to pick
};

// The IPv4 addresses whose RoCE v2 GID is in DEV's port-1 table, in table order.
std::vector<std::string> roce_v2_ipv4(std::string_view sysfs_root, std::string_view dev);

// Devices under SYSFS/class/infiniband, sorted.
std::vector<std::string> rdma_devices(std::string_view sysfs_root);

// The rail a lane dials from: lane i on the i-th rail that is up (`skip`:
// its failed dials so far, each moving on to the next), so lanes spread
// over the rails and a rail that is down gets none. `count` when no rail
// of the first `count` is up.
std::uint32_t pick_rail(std::span<const bool> up, std::uint32_t count, std::uint32_t lane, std::uint32_t skip) noexcept;

// The place among the rails that lane `lane` of a channel of `lanes` lanes
// takes (pick_rail's `lane`): a channel with fewer lanes than there are
// rails starts at a rail of its own, by its id, so channels of one lane
// (the default) spread over the NICs instead of all landing on rail 0.
// A channel with a lane for every rail keeps lane i on rail i.
constexpr std::uint32_t lane_rail_slot(std::uint32_t lane, std::uint32_t lanes, std::uint32_t channel,
                                       std::uint32_t rails) noexcept {
  return lanes < rails ? lane + channel % rails : lane;
}

// Resolves --device into `out`; BadRequest saying why when it cannot.
[[nodiscard]] Error resolve_rails(std::string_view device_option, std::string_view listen_host,
                                  std::string_view sysfs_root, std::vector<RailSpec>& out);

}  // namespace ferry::daemon::rails
