// The device's own events (ibv_get_async_event) and the port state that
// decides whether rdma_cm may send anything: rdma_device_events.cpp says
// why cm ids are parked while port 1 is down. Private to rdma/.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstdint>
#include <vector>

namespace ferry::transport::rdma {

class ConnectionTable;

class DeviceEvents {
 public:
  DeviceEvents() = default;
  DeviceEvents(const DeviceEvents&) = delete;
  DeviceEvents& operator=(const DeviceEvents&) = delete;

  // The device (owned by librdmacm); set once at the transport's init.
  void attach(ibv_context* ctx) noexcept { ctx_ = ctx; }

  // Handles every pending async event: a QP's fatal event drains its
  // connection, a fatal device drains them all, port events release parked
  // ids. Returns how many events it handled.
  std::uint64_t handle(ConnectionTable& conns) noexcept;
  bool port_active() noexcept;
  // Disconnects (when asked) and destroys `id`, or parks it while the port is down.
  void retire_id(rdma_cm_id* id, bool disconnect) noexcept;
  bool has_parked() const noexcept { return !parked_ids_.empty(); }
  // Destroys the parked ids once the port is active again (looked at every
  // kPortPollMs at most).
  void release_parked_ids() noexcept;
  // Destroys every parked id now (the transport's destructor).
  void destroy_parked() noexcept;

 private:
  const char* device_name() const noexcept;

  ibv_context* ctx_ = nullptr;
  std::vector<rdma_cm_id*> parked_ids_;  // torn down while the port was down
  std::int64_t next_port_poll_ms_ = 0;
};

}  // namespace ferry::transport::rdma
