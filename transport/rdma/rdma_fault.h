// Test-only fault injection for the rdma backend, compiled in only with
// -Dfault_injection=true (transport/fault_spec.h) and off unless ferryd's
// environment sets FERRY_FAULT_RDMA (the VM fault checks do):
//
//   FERRY_FAULT_RDMA=qp-error-after=N
//   FERRY_FAULT_RDMA=accept-qp-fail-after=N
//
// After the Nth data WR this transport posts (counted from 1 over all its
// connections: a SEND whose header type is Send, Call or Response, or an
// RDMA WRITE / WRITE with immediate; lane handshakes and other control
// messages are not counted), the QP that carried it is moved to
// IBV_QPS_ERR with ibv_modify_qp, right after the post. The NIC then
// flushes every WR and receive on it (IBV_WC_WR_FLUSH_ERR), which the
// datapath handles like any failed completion: the connection drains with
// PeerReset. Fires once. N: 1..10^12; anything else makes
// RdmaTransport::create() fail with BadRequest and an error log. When set,
// create() logs a warning that the switch is armed.
//
// accept-qp-fail-after=N: the QP for the Nth connection request this
// transport takes (counted from 1, after admission) is not made, as if
// ibv_create_qp had refused it; the request is rejected saying so
// (cm_reject.h, NoQp). Fires once.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "ferry/result.h"
#include "transport/fault_spec.h"
#include "transport/transport.h"

namespace ferry::transport::rdma {

class ConnectionTable;

inline constexpr const char* kRdmaFaultEnv = "FERRY_FAULT_RDMA";

struct RdmaFault {
  std::uint64_t after = 0;  // 0: off
  std::uint64_t seen = 0;
  bool fired = false;
  std::uint64_t accept_after = 0;  // accept-qp-fail-after; 0: off
  std::uint64_t accepts_seen = 0;

  bool armed() const noexcept {
    if constexpr (!kFaultInjection) return false;
    return after != 0 && !fired;
  }
  // Whether the QP of the connection request being taken is refused (once);
  // logs the injection when it is.
  bool refuse_qp() noexcept {
    if constexpr (!kFaultInjection) return false;
    if (accept_after == 0 || ++accepts_seen != accept_after) return false;
    log_refused_qp();
    return true;
  }
  // Called by post_send while armed with the WRs it just posted: counts the
  // data WRs and moves the QP of the after-th to IBV_QPS_ERR.
  void inject(ConnectionTable& conns, std::span<const SendWr> posted) noexcept;
  void log_refused_qp() const noexcept;  // out of line, off the accept path's header
};

// Whether the fault counts this WR (see above).
constexpr bool is_data_wr(const SendWr& wr) noexcept {
  if (wr.op == WrOp::RdmaWrite || wr.op == WrOp::RdmaWriteImm) return true;
  if (wr.op != WrOp::Send) return false;
  const wire::MsgType t = wr.header.type;
  return t == wire::MsgType::Send || t == wire::MsgType::Call || t == wire::MsgType::Response;
}

[[nodiscard]] Result<RdmaFault> parse_rdma_fault(std::string_view spec) noexcept;
// after == 0 when FERRY_FAULT_RDMA is unset or empty, and always in a build
// without fault injection.
[[nodiscard]] Result<RdmaFault> rdma_fault_from_env();

}  // namespace ferry::transport::rdma
