#include "daemon/transport_choice.h"

#include <filesystem>
#include <system_error>

#include "ferry_config.h"

namespace ferry::daemon {

namespace {

// RDMA devices as the kernel lists them; no libibverbs needed to look.
std::string first_rdma_device(const std::string& wanted) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/infiniband", ec)) {
    std::string name = entry.path().filename().string();
    if (wanted.empty() || name == wanted) return name;
  }
  return {};
}

}  // namespace

TransportChoice choose_transport(const Config& config) {
  switch (config.transport) {
    case Transport::Tcp: return {"tcp", "transport tcp (requested)"};
    case Transport::Rdma: return {"rdma", "transport rdma (requested)"};
    case Transport::Auto: break;
  }
  if (!FERRY_HAVE_RDMA) return {"tcp", "transport auto -> tcp: built without rdma support"};
  std::string dev = first_rdma_device(config.device);
  if (dev.empty()) {
    return {"tcp", config.device.empty() ? "transport auto -> tcp: no RDMA device in /sys/class/infiniband"
                                         : "transport auto -> tcp: RDMA device " + config.device + " not found"};
  }
  return {"rdma", "transport auto -> rdma: RDMA device " + dev + " found"};
}

}  // namespace ferry::daemon
