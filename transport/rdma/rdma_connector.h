// The rdma_cm side of the backend: listen, the active side (connect, which
// blocks; connect_async, driven by cm events), the passive side (connect
// requests) and every cm event. Private to rdma/; the transport forwards
// its Transport calls here.
//
// Files: rdma_cm_events.cpp (listen, cm events, connect requests),
// rdma_connect.cpp (connect), rdma_connect_async.cpp (connect_async).
#pragma once

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <string_view>

#include "ferry/result.h"
#include "transport/log_limiter.h"
#include "transport/rdma/cm_reject.h"
#include "transport/rdma/rdma_config.h"
#include "transport/rdma/rdma_connections.h"
#include "transport/rdma/rdma_device_events.h"
#include "transport/rdma/rdma_fault.h"
#include "transport/rdma/rdma_qp.h"
#include "transport/transport.h"

namespace ferry::transport::rdma {

class RdmaConnector {
 public:
  // `fault`: the transport's test-only switch (rdma_fault.h), set after construction.
  RdmaConnector(const RdmaConfig& config, ConnectionTable& conns, QpFactory& qps, DeviceEvents& events,
                RdmaFault& fault);
  ~RdmaConnector();
  RdmaConnector(const RdmaConnector&) = delete;
  RdmaConnector& operator=(const RdmaConnector&) = delete;

  // The device and the shared cm event channel (both owned by the transport).
  void attach(ibv_context* ctx, rdma_event_channel* channel) noexcept {
    ctx_ = ctx;
    channel_ = channel;
  }

  [[nodiscard]] Result<std::uint16_t> listen(std::string_view host, std::uint16_t port);
  // Blocks up to connect_timeout_ms (rdma_connect.cpp).
  [[nodiscard]] Result<ConnId> connect(std::string_view host, std::uint16_t port);
  // Starts; poll() finishes it with Connected or Closed (rdma_connect_async.cpp).
  [[nodiscard]] Result<ConnId> connect_async(std::string_view host, std::uint16_t port);
  // A connection still Connecting, abandoned by its owner: a quiet Closed.
  void abandon(std::uint32_t slot) noexcept;

  // Every pending cm event (poll's slow sources).
  void handle_events() noexcept;
  // Fails connect_async()s past their deadline.
  void expire_connects() noexcept;
  // Destroys the listening id (the transport's destructor, before the channel goes).
  void close_listener() noexcept;
  // Tears down accepted connections that sent nothing within
  // hello_timeout_ms (the slow sources), and re-arms timer_fd().
  void expire_silent() noexcept;
  // Readable at the next first-message deadline: in the transport's epoll
  // set, so a sleeping owner wakes for it (-1 when it could not be made:
  // deadlines are then looked at only when the owner wakes anyway).
  int timer_fd() const noexcept { return timer_fd_; }

 private:
  void on_connect_request(rdma_cm_id* id) noexcept;
  // The admission rules' verdict on a request from `src`: a slot, after
  // closing a silent connection to make room if need be; -1: refused.
  int admit(const AcceptGuard::Source& src) noexcept;
  void arm_timer() noexcept;
  bool resolve_next(std::uint32_t slot) noexcept;
  // rejected: a REJECTED event's reason (cm_reject.h), Unknown for any other event.
  void on_connect_event(std::uint32_t slot, rdma_cm_event_type type, int status, CmReject rejected) noexcept;
  void reject(rdma_cm_id* id, CmReject why) noexcept;
  void connect_failed(std::uint32_t slot, const char* why, Status closed_status) noexcept;
  const char* device_name() const noexcept;

  const RdmaConfig& config_;
  ConnectionTable& conns_;
  QpFactory& qps_;
  DeviceEvents& events_;
  RdmaFault& fault_;
  ibv_context* ctx_ = nullptr;
  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* listen_id_ = nullptr;
  int timer_fd_ = -1;
  LogLimiter other_device_log_;  // requests that arrive on another device's id
};

}  // namespace ferry::transport::rdma
