// Device discovery (see device.h).
#include "transport/rdma/device.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <cstring>

#include <spdlog/spdlog.h>

namespace ferry::transport::rdma {

bool parse_sockaddr(std::string_view host, std::uint16_t port, sockaddr_storage& out) {
  const std::string h(host);
  std::memset(&out, 0, sizeof out);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
  if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
  if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    return true;
  }
  return false;
}

int device_count() noexcept {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list != nullptr) ibv_free_device_list(list);
  return list == nullptr ? 0 : n;
}

namespace {

// The device rdma_cm binds `address` to: the one whose port carries it.
ibv_context* device_of_address(const std::string& address) {
  sockaddr_storage ss;
  if (!parse_sockaddr(address, 0, ss)) return nullptr;
  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch == nullptr) return nullptr;
  rdma_cm_id* id = nullptr;
  ibv_context* ctx = nullptr;
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) == 0) {
    if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&ss)) == 0) ctx = id->verbs;
    rdma_destroy_id(id);
  }
  rdma_destroy_event_channel(ch);
  return ctx;
}

}  // namespace

Result<DeviceChoice> pick_device(const RdmaConfig& config) {
  int n = 0;
  ibv_context** list = rdma_get_devices(&n);
  if (list == nullptr || n == 0) {
    if (list != nullptr) rdma_free_devices(list);
    spdlog::error("rdma: no RDMA device found (no NIC, or rdma_rxe/ib_uverbs not loaded)");
    return Result<DeviceChoice>::fail(Status::NotSupported);
  }
  DeviceChoice choice;
  std::string names;
  for (int i = 0; i < n; ++i) {
    const char* name = ibv_get_device_name(list[i]->device);
    names += (i ? ", " : "") + std::string(name);
    if (!config.device.empty() && config.device == name) {
      choice.ctx = list[i];
      choice.reason = "named by config";
    }
  }
  if (config.device.empty() && !config.address.empty()) {
    sockaddr_storage ss;
    if (!parse_sockaddr(config.address, 0, ss)) {
      rdma_free_devices(list);
      spdlog::error("rdma: address '{}' is not a numeric IP address", config.address);
      return Result<DeviceChoice>::fail(Status::BadRequest);
    }
    choice.ctx = device_of_address(config.address);
    choice.reason = "its port carries " + config.address;
  } else if (config.device.empty() && n == 1) {
    choice.ctx = list[0];
    choice.reason = "the only device";
  }
  rdma_free_devices(list);  // frees the array only; librdmacm keeps the contexts open
  if (choice.ctx == nullptr) {
    spdlog::error("rdma: no usable device (wanted device '{}', address '{}'; present: {})", config.device,
                  config.address, names);
    return Result<DeviceChoice>::fail(Status::NotSupported);
  }
  choice.name = ibv_get_device_name(choice.ctx->device);
  spdlog::info("rdma: using device {} ({}); present: {}", choice.name, choice.reason, names);
  return Result<DeviceChoice>::ok(std::move(choice));
}

bool software_provider(const ibv_context* ctx) noexcept {
  if (ctx == nullptr) return false;
  const std::string_view name = ibv_get_device_name(ctx->device);
  return name.starts_with("rxe") || name.starts_with("siw");
}

}  // namespace ferry::transport::rdma
