// QpFactory: QP setup for rdma_cm ids. QPs are created by ferry (not
// rdma_create_qp) and moved INIT -> RTR -> RTS here, so every transport attribute is set
// explicitly: ack timeout and retry count from the config, the source GID
// override, and rnr_retry = 0 always (see rdma_config.h).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "transport/rdma/device.h"
#include "transport/rdma/rdma_qp.h"

namespace ferry::transport::rdma {

void QpFactory::conn_param(rdma_conn_param& p, std::uint32_t qp_num) const noexcept {
  std::memset(&p, 0, sizeof p);
  p.qp_num = qp_num;
  p.responder_resources = config_.rd_atomic;
  p.initiator_depth = config_.rd_atomic;
  p.retry_count = config_.retry_cnt;
  p.rnr_retry_count = 0;  // an RNR is ferry's bug: fail, never retry
  p.flow_control = 1;
}

Status QpFactory::setup(std::uint32_t slot, rdma_cm_id* id, bool passive) {
  RdmaConnection& c = conns_[slot];
  ibv_qp_init_attr a{};
  a.send_cq = cq_;
  a.recv_cq = cq_;
  a.srq = srq_;  // receives come from the transport's shared pool (rdma_transport.h)
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 0;  // selective signalling
  // Providers size a send queue in powers of two, and one slot stays empty
  // to tell full from empty: 127 WRs take 128 slots where 128 would take
  // 256. A software provider's queue is a kernel buffer mapped into ferryd
  // (resident per QP, idle or not), and Soft-RoCE's element is 208 B plus
  // the inline room, rounded up: 48 B keep it at 256 B where 256 B of
  // inline double it. A copy is a copy there, so inline buys nothing.
  a.cap.max_send_wr = kSendQueueDepth - 1;
  a.cap.max_send_sge = 2;
  a.cap.max_inline_data =
      software_provider(pd_->context) ? std::min(config_.max_inline, kSoftwareMaxInline) : config_.max_inline;
  ibv_qp* qp = ibv_create_qp(pd_, &a);
  if (qp == nullptr && config_.max_inline > 0) {
    spdlog::warn("rdma: QP with {} B inline refused ({}); retrying without inline", config_.max_inline,
                 std::strerror(errno));
    a.cap.max_inline_data = 0;
    qp = ibv_create_qp(pd_, &a);
  }
  if (qp == nullptr) {
    spdlog::error("rdma: ibv_create_qp failed: {}", std::strerror(errno));
    return Status::NoMemory;
  }
  // Same device and request for every QP: the grant is the same too.
  max_inline_ = a.cap.max_inline_data;
  sq_depth_ = std::min(a.cap.max_send_wr, kSendQueueDepth);
  c.qp = qp;
  c.id = id;
  c.sq_head = c.sq_done = c.sq_tail = 0;
  c.unsignaled = 0;
  id->context = reinterpret_cast<void*>(static_cast<std::uintptr_t>(slot));

  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;
  Status s = Status::Ok;
  // Access flags set explicitly: before the REQ/REP exchange rdma_cm offers
  // no REMOTE_READ on the active side (librdmacm redoes INIT after the reply
  // for its own QPs), and the peer's READs then fail as invalid requests.
  // The MRs' rkeys scope what a peer can actually touch.
  const bool init_ok = rdma_init_qp_attr(id, &attr, &mask) == 0;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  mask |= IBV_QP_ACCESS_FLAGS;
  if (!init_ok || ibv_modify_qp(qp, &attr, mask) != 0) {
    spdlog::error("rdma: QP {} to INIT failed: {}", qp->qp_num, std::strerror(errno));
    s = Status::PeerUnreachable;
  }
  // The shared receive queue is posted already (the transport's init), so
  // the peer's first message finds a receive.
  if (s == Status::Ok) conns_.qps.insert(qp->qp_num, slot);
  if (s == Status::Ok && passive) s = to_rts(slot);
  if (s != Status::Ok) {
    conns_.qps.erase(qp->qp_num);
    ibv_destroy_qp(qp);
    c.qp = nullptr;
    c.id = nullptr;
  }
  return s;
}

Status QpFactory::to_rts(std::uint32_t slot) {
  RdmaConnection& c = conns_[slot];
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_RTR;
  if (rdma_init_qp_attr(c.id, &attr, &mask) != 0) {
    spdlog::error("rdma: rdma_init_qp_attr(RTR) failed: {}", std::strerror(errno));
    return Status::PeerUnreachable;
  }
  // Set explicitly: on the active side of an rdma_cm connection with a QP
  // made outside rdma_cm the kernel hands back max_dest_rd_atomic 0, and the
  // peer's RDMA READs then fail with "remote invalid request".
  attr.max_dest_rd_atomic = config_.rd_atomic;
  mask |= IBV_QP_MAX_DEST_RD_ATOMIC;
  const int cm_sgid = attr.ah_attr.grh.sgid_index;
  if (config_.gid_index >= 0) {
    attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(config_.gid_index);
  } else if (gid_.index >= 0 && gid_.index != cm_sgid) {
    spdlog::warn("rdma: rdma_cm routes QP {} from GID[{}], the table scan chose GID[{}] ({}); keeping rdma_cm's",
                 c.qp->qp_num, cm_sgid, gid_.index, gid_.reason);
  }
  if (ibv_modify_qp(c.qp, &attr, mask) != 0) {
    spdlog::error("rdma: QP {} to RTR failed: {}", c.qp->qp_num, std::strerror(errno));
    return Status::PeerUnreachable;
  }
  attr = ibv_qp_attr{};
  mask = 0;
  attr.qp_state = IBV_QPS_RTS;
  if (rdma_init_qp_attr(c.id, &attr, &mask) != 0) {
    spdlog::error("rdma: rdma_init_qp_attr(RTS) failed: {}", std::strerror(errno));
    return Status::PeerUnreachable;
  }
  attr.timeout = config_.ack_timeout;
  attr.retry_cnt = config_.retry_cnt;
  attr.rnr_retry = 0;
  attr.max_rd_atomic = config_.rd_atomic;
  mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  if (ibv_modify_qp(c.qp, &attr, mask) != 0) {
    spdlog::error("rdma: QP {} to RTS failed: {}", c.qp->qp_num, std::strerror(errno));
    return Status::PeerUnreachable;
  }
  spdlog::debug("rdma: QP {} RTS (sgid {}, timeout {}, retry_cnt {}, rnr_retry 0)", c.qp->qp_num,
                attr.ah_attr.grh.sgid_index, config_.ack_timeout, config_.retry_cnt);
  return Status::Ok;
}

}  // namespace ferry::transport::rdma
