// Start-up check that ferryd's descriptor limit (RLIMIT_NOFILE) covers what
// its configuration lets clients and peers take: about kPerClient
// descriptors per attached client, the control connections with the
// administrators' reserve, the attach handshakes in flight, the tcp
// transport's peer connections (peer-max-connections) and a fixed base.
// Short of it, the soft limit is raised (up to the hard limit); when even
// the hard limit is short, start-up is refused with the numbers, rather
// than failing accept() later. Start-up only.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/config/config.h"
#include "ferry/error.h"

namespace ferry::daemon {

// A client's descriptors in ferryd: its attach socket, its segment's memfd
// and the two doorbell eventfds.
inline constexpr std::uint64_t kDescriptorsPerClient = 4;
// Listeners, epoll, eventfds, log and rdma device files, with room to
// spare; the tcp transport's connections (peer-max-connections) come on top.
inline constexpr std::uint64_t kBaseDescriptors = 96;
inline constexpr std::uint64_t kDescriptorsPerEngine = 16;

std::uint64_t descriptors_needed(const Config& c, std::uint32_t engines = 1) noexcept;

struct DescriptorLimit {
  std::uint64_t needed = 0;
  std::uint64_t soft_before = 0;
  std::uint64_t soft = 0;  // after any raise
  std::uint64_t hard = 0;
};

// Raises the soft limit when needed. On success returns the limits (the
// caller logs a raise); when the hard limit is too low, BadRequest naming
// max-clients, control-max-connections, peer-max-connections, the numbers
// and the fix; NoMemory when the system refuses to read or raise the limit.
[[nodiscard]] Error ensure_descriptor_limit(const Config& c, std::uint32_t engines, DescriptorLimit* out);

}  // namespace ferry::daemon
