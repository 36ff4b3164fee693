// Source GID selection for RoCE v2 from the device's GID table in sysfs:
//   SYSFS/class/infiniband/DEV/ports/PORT/gids/N           the GID
//   SYSFS/class/infiniband/DEV/ports/PORT/gid_attrs/types/N "RoCE v2" / "IB/RoCE v1"
//   SYSFS/class/infiniband/DEV/ports/PORT/gid_attrs/ndevs/N the netdev it belongs to
// For an IPv4 address the wanted entry is ::ffff:a.b.c.d of type RoCE v2;
// its netdev is the interface carrying the address. Control path only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ferry/result.h"
#include "transport/gid_text.h"

namespace ferry::transport::rdma {

inline constexpr int kMaxGidEntries = 256;

struct GidChoice {
  int index = -1;
  std::string gid;     // as sysfs prints it: 0000:0000:...:ffff:c612:0001
  std::string type;    // "RoCE v2"
  std::string netdev;  // "veth0"
  std::string reason;  // why this entry (for the log line)
};

using transport::ipv4_mapped_gid;  // gid_text.h

// Picks the source GID of DEV/PORT for `address`. override_index >= 0 takes
// that entry if it exists and is non-zero (BadRequest otherwise). Otherwise
// the IPv4-mapped RoCE v2 entry of `address`; NotSupported when the table has
// none (address not on this device, or RoCE v2 missing). Logs the choice.
// `sysfs_root` is "/sys" except in tests (a fake tree).
[[nodiscard]] Result<GidChoice> select_gid(std::string_view sysfs_root, std::string_view dev, int port,
                                           std::string_view address, int override_index);

}  // namespace ferry::transport::rdma
