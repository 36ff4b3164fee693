// QP set-up for rdma_cm ids: ferry creates its QPs itself (not
// rdma_create_qp) and moves them INIT -> RTR -> RTS, so every transport
// attribute is set explicitly (rdma_qp.cpp). Private to rdma/.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstdint>

#include "ferry/status.h"
#include "transport/rdma/gid.h"
#include "transport/rdma/memory.h"
#include "transport/rdma/rdma_config.h"
#include "transport/rdma/rdma_connections.h"

namespace ferry::transport::rdma {

class QpFactory {
 public:
  // All references outlive the factory (members of the same transport);
  // pd, cq and srq are valid once the transport's init set them.
  QpFactory(const RdmaConfig& config, ConnectionTable& conns, const GidChoice& gid)
      : config_(config), conns_(conns), gid_(gid) {}
  QpFactory(const QpFactory&) = delete;
  QpFactory& operator=(const QpFactory&) = delete;

  void attach(ibv_pd* pd, ibv_cq* cq, ibv_srq* srq) noexcept {
    pd_ = pd;
    cq_ = cq;
    srq_ = srq;
  }

  // rdma_cm's connection parameters for a QP of ours.
  void conn_param(rdma_conn_param& p, std::uint32_t qp_num) const noexcept;
  // Creates the QP of `slot` for `id` on the transport's shared receive
  // queue, to INIT; the passive side also goes to RTS. PeerUnreachable /
  // NoMemory.
  [[nodiscard]] Status setup(std::uint32_t slot, rdma_cm_id* id, bool passive);
  // RTR then RTS with ferry's timeout, retries, rnr_retry 0, GID override.
  [[nodiscard]] Status to_rts(std::uint32_t slot);
  // Inline bytes the device granted (the same for every QP of it).
  std::uint32_t max_inline() const noexcept { return max_inline_; }
  // Send WRs a QP takes at once: what the device granted, at most
  // kSendQueueDepth (the transport's ring).
  std::uint32_t sq_depth() const noexcept { return sq_depth_; }

 private:
  const RdmaConfig& config_;
  ConnectionTable& conns_;
  const GidChoice& gid_;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_srq* srq_ = nullptr;
  std::uint32_t max_inline_ = 0;
  std::uint32_t sq_depth_ = kSendQueueDepth - 1;
};

}  // namespace ferry::transport::rdma
