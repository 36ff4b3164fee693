#include "daemon/rails/rail_config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "transport/gid_text.h"

namespace ferry::daemon::rails {

namespace {

bool is_ipv4(const std::string& s) {
  in_addr a{};
  return inet_pton(AF_INET, s.c_str(), &a) == 1;
}

}  // namespace

std::vector<std::string> roce_v2_ipv4(std::string_view sysfs_root, std::string_view dev) {
  const std::string base = std::string(sysfs_root) + "/class/infiniband/" + std::string(dev) + "/ports/1";
  std::vector<std::string> out;
  for (int i = 0; i < 256; ++i) {
    const std::string gid_path = base + "/gids/" + std::to_string(i);
    if (!std::ifstream(gid_path)) break;
    if (transport::read_sysfs_line(base + "/gid_attrs/types/" + std::to_string(i)) != "RoCE v2") continue;
    Result<std::string> a = transport::mapped_ipv4(transport::read_sysfs_line(gid_path));
    if (a && std::find(out.begin(), out.end(), a.value) == out.end()) out.push_back(std::move(a.value));
  }
  return out;
}

std::uint32_t pick_rail(std::span<const bool> up, std::uint32_t count, std::uint32_t lane,
                        std::uint32_t skip) noexcept {
  std::uint32_t n = 0;
  for (std::uint32_t i = 0; i < count && i < up.size(); ++i) n += up[i] ? 1 : 0;
  if (n == 0) return count;
  std::uint32_t want = (lane + skip) % n;
  for (std::uint32_t i = 0; i < count && i < up.size(); ++i) {
    if (!up[i]) continue;
    if (want == 0) return i;
    --want;
  }
  return count;
}

std::vector<std::string> rdma_devices(std::string_view sysfs_root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(std::string(sysfs_root) + "/class/infiniband", ec)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Error resolve_rails(std::string_view device_option, std::string_view listen_host, std::string_view sysfs_root,
                    std::vector<RailSpec>& out) {
  std::vector<RailSpec> rails;
  const std::string listen(listen_host);
  if (device_option.empty() || device_option.find(',') == std::string_view::npos) {
    if (device_option != "all") {
      // One rail: the transport resolves the device and address itself (as
      // it always did), unless an address was given.
      const std::string one(device_option);
      const auto at = one.find('@');
      rails.push_back({one.substr(0, at), at == std::string::npos ? listen : one.substr(at + 1)});
      if (at != std::string::npos && !is_ipv4(rails[0].address)) {
        return Error::bad_request("--device " + one + ": '" + rails[0].address + "' is not a numeric IPv4 address");
      }
      out = std::move(rails);
      return {};
    }
  }
  std::vector<std::string> names;
  std::vector<std::string> given;
  if (device_option == "all") {
    for (const std::string& d : rdma_devices(sysfs_root)) {
      if (!roce_v2_ipv4(sysfs_root, d).empty()) {
        names.push_back(d);
        given.emplace_back();
      }
    }
    if (names.empty()) {
      return Error::bad_request("--device all: no RDMA device with an IPv4 RoCE v2 GID");
    }
  } else {
    std::size_t from = 0;
    const std::string opt(device_option);
    while (from <= opt.size()) {
      const std::size_t comma = std::min(opt.find(',', from), opt.size());
      const std::string item = opt.substr(from, comma - from);
      from = comma + 1;
      if (item.empty()) {
        return Error::bad_request("--device " + opt + ": an empty name in the list");
      }
      const auto at = item.find('@');
      names.push_back(item.substr(0, at));
      given.push_back(at == std::string::npos ? std::string() : item.substr(at + 1));
      if (!given.back().empty() && !is_ipv4(given.back())) {
        return Error::bad_request("--device " + opt + ": '" + given.back() + "' is not a numeric IPv4 address");
      }
    }
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (std::count(names.begin(), names.end(), names[i]) != 1) {
      return Error::bad_request("--device: " + names[i] + " named twice");
    }
    std::string addr = given[i];
    if (addr.empty()) {
      const std::vector<std::string> have = roce_v2_ipv4(sysfs_root, names[i]);
      if (have.empty()) {
        return Error::bad_request("--device: " + names[i] +
                                  " has no IPv4 RoCE v2 GID (no such device, or no IPv4 address on its netdev)");
      }
      addr = std::find(have.begin(), have.end(), listen) != have.end() ? listen : have.front();
    }
    rails.push_back({names[i], addr});
  }
  // Rail 0 carries the --listen address (the bootstrap and handshake).
  auto first = std::find_if(rails.begin(), rails.end(), [&](const RailSpec& r) { return r.address == listen; });
  if (first != rails.end()) std::rotate(rails.begin(), first, first + 1);
  if (rails.size() > 4) {
    return Error::bad_request("--device: at most 4 rails (" + std::to_string(rails.size()) + " named)");
  }
  out = std::move(rails);
  return {};
}

}  // namespace ferry::daemon::rails
