// FERRY_FAULT_RDMA (rdma_fault.h): parsing at create(), and the hook that
// post_send calls while the fault is armed.
#include "transport/rdma/rdma_fault.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

#include "transport/rdma/rdma_transport.h"

namespace ferry::transport::rdma {

namespace {

constexpr std::uint64_t kMaxAfter = 1'000'000'000'000ull;

}  // namespace

Result<RdmaFault> parse_rdma_fault(std::string_view spec) noexcept {
  constexpr std::string_view kKey = "qp-error-after=";
  if (!spec.starts_with(kKey)) return Result<RdmaFault>::fail(Status::BadRequest);
  const std::string_view count = spec.substr(kKey.size());
  if (count.empty() || count.size() > 13) return Result<RdmaFault>::fail(Status::BadRequest);
  std::uint64_t v = 0;
  for (const char ch : count) {
    if (ch < '0' || ch > '9') return Result<RdmaFault>::fail(Status::BadRequest);
    v = v * 10 + static_cast<std::uint64_t>(ch - '0');
  }
  if (v == 0 || v > kMaxAfter) return Result<RdmaFault>::fail(Status::BadRequest);
  RdmaFault f;
  f.after = v;
  return Result<RdmaFault>::ok(f);
}

Result<RdmaFault> rdma_fault_from_env() {
  const char* v = std::getenv(kRdmaFaultEnv);
  if (v == nullptr || *v == '\0') return Result<RdmaFault>::ok(RdmaFault{});
  auto f = parse_rdma_fault(v);
  if (!f) {
    spdlog::error("rdma: {}='{}' is malformed: expected qp-error-after=N (N in 1..{})", kRdmaFaultEnv, v, kMaxAfter);
    return f;
  }
  spdlog::warn(
      "rdma: TEST-ONLY FAULT INJECTION ARMED ({}={}): the QP of data WR #{} will be moved to "
      "IBV_QPS_ERR",
      kRdmaFaultEnv, v, f.value.after);
  return f;
}

void RdmaTransport::inject_fault(std::span<const SendWr> posted) noexcept {
  for (const SendWr& wr : posted) {
    if (!is_data_wr(wr) || ++fault_.seen < fault_.after) continue;
    fault_.fired = true;
    ibv_qp* qp = conn_qp(wr.conn);
    if (qp == nullptr) {
      spdlog::warn("rdma: FAULT NOT INJECTED: connection of data WR #{} is not open", fault_.seen);
      return;
    }
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    const int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
    // Once per process and only under a test switch: the log's cost is fine here.
    spdlog::warn("rdma: FAULT INJECTED: QP {} to IBV_QPS_ERR after data WR #{}: {}", qp->qp_num, fault_.seen,
                 rc == 0 ? "ok" : std::strerror(rc));
    return;
  }
}

}  // namespace ferry::transport::rdma
