// RDMA device discovery: which verbs context a transport uses. Contexts come
// from rdma_get_devices(), the ones librdmacm itself opened, so a PD and CQ
// made on them serve QPs of rdma_cm ids of the same device. Control path.
#pragma once

#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <string>
#include <string_view>

#include "ferry/result.h"
#include "transport/rdma/rdma_config.h"

namespace ferry::transport::rdma {

struct DeviceChoice {
  ibv_context* ctx = nullptr;  // owned by librdmacm; never closed here
  std::string name;
  std::string reason;  // for the log line
};

// Numeric IPv4/IPv6 host + port into a sockaddr; false when not numeric.
bool parse_sockaddr(std::string_view host, std::uint16_t port, sockaddr_storage& out);

// Picks the device: by config.device name, else the one rdma_cm binds
// config.address to, else the only device. NotSupported (with an error log
// naming what was looked for) when none is usable; BadRequest when the name
// or address does not parse.
[[nodiscard]] Result<DeviceChoice> pick_device(const RdmaConfig& config);

// Number of RDMA devices present (0 when the verbs library finds none).
int device_count() noexcept;

// Whether `ctx` is a software provider (Soft-RoCE rxe, soft-iWARP siw):
// its "NIC" is kernel code on the host's CPUs and its queues are kernel
// buffers mapped into the process.
bool software_provider(const ibv_context* ctx) noexcept;

}  // namespace ferry::transport::rdma
