// GID table scan (sysfs) for RoCE v2 source GID selection. See gid.h.
#include "transport/rdma/gid.h"

#include <fstream>

#include <spdlog/spdlog.h>

#include "transport/gid_text.h"

namespace ferry::transport::rdma {
namespace {

bool is_zero_gid(const std::string& gid) {
  for (char c : gid) {
    if (c != '0' && c != ':') return false;
  }
  return true;
}

}  // namespace

Result<GidChoice> select_gid(std::string_view sysfs_root, std::string_view dev, int port, std::string_view address,
                             int override_index) {
  const std::string base =
      std::string(sysfs_root) + "/class/infiniband/" + std::string(dev) + "/ports/" + std::to_string(port);
  auto entry = [&base](int i) {
    GidChoice c;
    c.index = i;
    c.gid = read_sysfs_line(base + "/gids/" + std::to_string(i));
    c.type = read_sysfs_line(base + "/gid_attrs/types/" + std::to_string(i));
    c.netdev = read_sysfs_line(base + "/gid_attrs/ndevs/" + std::to_string(i));
    return c;
  };

  if (override_index >= 0) {
    GidChoice c = entry(override_index);
    if (c.gid.empty() || is_zero_gid(c.gid)) {
      spdlog::error("rdma: gid_index {} of {} port {} is empty or missing", override_index, dev, port);
      return Result<GidChoice>::fail(Status::BadRequest);
    }
    c.reason = "gid_index override from config";
    spdlog::info("rdma: {} port {} uses GID[{}] {} ({}, {}): {}", dev, port, c.index, c.gid, c.type, c.netdev,
                 c.reason);
    return Result<GidChoice>::ok(std::move(c));
  }

  const Result<std::string> mapped = ipv4_mapped_gid(address);
  if (!mapped) {
    spdlog::error("rdma: cannot pick a RoCE v2 GID for '{}': not a numeric IPv4 address", address);
    return Result<GidChoice>::fail(Status::BadRequest);
  }
  const std::string& want = mapped.value;
  for (int i = 0; i < kMaxGidEntries; ++i) {
    GidChoice c = entry(i);
    // Tables are dense up to the device's size: a missing file ends it.
    if (!std::ifstream(base + "/gids/" + std::to_string(i))) break;
    if (c.gid != want || c.type != "RoCE v2") continue;
    c.reason =
        "IPv4-mapped RoCE v2 GID of " + std::string(address) + (c.netdev.empty() ? std::string() : " on " + c.netdev);
    spdlog::info("rdma: {} port {} uses GID[{}] {} ({}, {}): {}", dev, port, c.index, c.gid, c.type, c.netdev,
                 c.reason);
    return Result<GidChoice>::ok(std::move(c));
  }
  spdlog::error("rdma: {} port {} has no RoCE v2 GID {} for {} (is the address on this device's netdev?)", dev, port,
                want, address);
  return Result<GidChoice>::fail(Status::NotSupported);
}

}  // namespace ferry::transport::rdma
