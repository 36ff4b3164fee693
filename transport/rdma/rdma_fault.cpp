// FERRY_FAULT_RDMA (rdma_fault.h): parsing at create(), the hook that
// post_send calls while the fault is armed, and the logs of both switches.
#include "transport/rdma/rdma_fault.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

#include "transport/fault_spec.h"
#include "transport/rdma/rdma_connections.h"

namespace ferry::transport::rdma {

Result<RdmaFault> parse_rdma_fault(std::string_view spec) noexcept {
  RdmaFault f;
  if (const auto after = parse_fault_count(spec, "qp-error-after=")) {
    f.after = *after;
  } else if (const auto accept = parse_fault_count(spec, "accept-qp-fail-after=")) {
    f.accept_after = *accept;
  } else {
    return Result<RdmaFault>::fail(Status::BadRequest);
  }
  return Result<RdmaFault>::ok(f);
}

Result<RdmaFault> rdma_fault_from_env() {
  if constexpr (!kFaultInjection) return Result<RdmaFault>::ok(RdmaFault{});  // ferryd logs that it is ignored
  const char* v = std::getenv(kRdmaFaultEnv);
  if (v == nullptr || *v == '\0') return Result<RdmaFault>::ok(RdmaFault{});
  auto f = parse_rdma_fault(v);
  if (!f) {
    spdlog::error("rdma: {}='{}' is malformed: expected qp-error-after=N or accept-qp-fail-after=N (N in 1..{})",
                  kRdmaFaultEnv, v, kMaxFaultAfter);
    return f;
  }
  if (f.value.after != 0)
    spdlog::warn("rdma: TEST-ONLY FAULT INJECTION ARMED ({}={}): the QP of data WR #{} will be moved to IBV_QPS_ERR",
                 kRdmaFaultEnv, v, f.value.after);
  else
    spdlog::warn("rdma: TEST-ONLY FAULT INJECTION ARMED ({}={}): the QP for connection request #{} will not be made",
                 kRdmaFaultEnv, v, f.value.accept_after);
  return f;
}

void RdmaFault::log_refused_qp() const noexcept {
  spdlog::warn("rdma: FAULT INJECTED: no QP made for connection request #{}", accepts_seen);
}

void RdmaFault::inject(ConnectionTable& conns, std::span<const SendWr> posted) noexcept {
  if constexpr (!kFaultInjection) return;
  for (const SendWr& wr : posted) {
    if (!is_data_wr(wr) || ++seen < after) continue;
    fired = true;
    ibv_qp* qp = conns.qp_of(wr.conn);
    if (qp == nullptr) {
      spdlog::warn("rdma: FAULT NOT INJECTED: connection of data WR #{} is not open", seen);
      return;
    }
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    const int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
    // Once per process and only under a test switch: the log's cost is fine here.
    spdlog::warn("rdma: FAULT INJECTED: QP {} to IBV_QPS_ERR after data WR #{}: {}", qp->qp_num, seen,
                 rc == 0 ? "ok" : std::strerror(rc));
    return;
  }
}

}  // namespace ferry::transport::rdma
