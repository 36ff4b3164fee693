// The RoCE GID table as sysfs prints it
// (SYSFS/class/infiniband/DEV/ports/PORT/{gids,gid_attrs/types,gid_attrs/ndevs}/N),
// read the same way by the rdma transport's GID choice (rdma/gid.h) and by
// the daemon's rail discovery (daemon/rails/rail_config.h), which is built
// without rdma-core too. Control path only.
#pragma once

#include <string>
#include <string_view>

#include "ferry/result.h"

namespace ferry::transport {

// One line of a sysfs attribute, without the trailing newline or blanks;
// "" when unreadable (sysfs returns EINVAL for the attrs of empty entries,
// which is not an error).
std::string read_sysfs_line(const std::string& path);

// "198.18.0.1" -> "0000:0000:0000:0000:0000:ffff:c612:0001"; BadRequest
// when `ipv4` is not a numeric IPv4 address.
[[nodiscard]] Result<std::string> ipv4_mapped_gid(std::string_view ipv4);

// The inverse: the dotted IPv4 address of an IPv4-mapped GID; BadRequest
// for any other GID.
[[nodiscard]] Result<std::string> mapped_ipv4(std::string_view gid);

}  // namespace ferry::transport
