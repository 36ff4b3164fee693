// Resolving --transport: auto means rdma when this host has an RDMA device
// (and ferryd was built with rdma support), tcp otherwise.
#pragma once

#include <string>

#include "daemon/config.h"

namespace ferry::daemon {

struct TransportChoice {
  std::string name;    // "rdma" or "tcp"
  std::string reason;  // one line for the log
};

TransportChoice choose_transport(const Config& config);

}  // namespace ferry::daemon
