#include "daemon/front/descriptor_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include "daemon/front/attach_server.h"
#include "daemon/front/control_server.h"

namespace ferry::daemon {

std::uint64_t descriptors_needed(const Config& c, std::uint32_t engines) noexcept {
  // Each engine has its own tcp transport (peer-max-connections) and a few
  // descriptors of its own (epoll, wake and event fds, transports' fds).
  return kBaseDescriptors + kDescriptorsPerClient * c.max_clients + c.control_max_connections + kAdminReserve +
         kMaxHandshakes + std::uint64_t{engines} * (c.peer_max_connections + kDescriptorsPerEngine);
}

Error ensure_descriptor_limit(const Config& c, std::uint32_t engines, DescriptorLimit* out) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0)
    return Error(Status::NoMemory, std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  out->needed = descriptors_needed(c, engines);
  out->soft_before = out->soft = lim.rlim_cur;
  out->hard = lim.rlim_max;
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= out->needed) return {};
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < out->needed) {
    return Error::bad_request(
        "max-clients " + std::to_string(c.max_clients) + ", control-max-connections " +
        std::to_string(c.control_max_connections) + " and peer-max-connections " +
        std::to_string(c.peer_max_connections) + " (per engine, " + std::to_string(engines) + ") need about " +
        std::to_string(out->needed) + " file descriptors, but the hard limit is " + std::to_string(lim.rlim_max) +
        ": raise it (LimitNOFILE= in the systemd unit, ulimit -Hn) or lower max-clients or peer-max-connections");
  }
  lim.rlim_cur = out->needed;
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) {
    return Error(Status::NoMemory, "cannot raise the descriptor limit from " + std::to_string(out->soft_before) +
                                       " to " + std::to_string(out->needed) + ": " + std::strerror(errno));
  }
  out->soft = out->needed;
  return {};
}

}  // namespace ferry::daemon
