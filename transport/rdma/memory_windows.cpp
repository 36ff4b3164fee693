#include "transport/rdma/memory_windows.h"

#include <sched.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace ferry::transport::rdma {

namespace {

// A bind is a local operation of the send queue: it completes without the
// network. The bound is for a device that stalls; it is never reached on a
// working one.
constexpr auto kBindWait = std::chrono::milliseconds(200);

// An RC QP connected to itself, in RTS: what ibv_bind_mw posts on.
ibv_qp* self_connected_qp(ibv_pd* pd, ibv_cq* cq, std::uint8_t port, int gid_index) {
  ibv_qp_init_attr a{};
  a.send_cq = cq;
  a.recv_cq = cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 4;
  a.cap.max_recv_wr = 1;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &a);
  if (qp == nullptr) return nullptr;
  ibv_gid gid{};
  bool ok = ibv_query_gid(pd->context, port, gid_index, &gid) == 0;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = port;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
  ok = ok && ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0;
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = IBV_MTU_1024;
  attr.dest_qp_num = qp->qp_num;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.is_global = 1;
  attr.ah_attr.grh.dgid = gid;
  attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index);
  attr.ah_attr.grh.hop_limit = 1;
  attr.ah_attr.port_num = port;
  ok = ok && ibv_modify_qp(qp, &attr,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0;
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = 14;
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.max_rd_atomic = 1;
  ok = ok && ibv_modify_qp(qp, &attr,
                           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                               IBV_QP_MAX_QP_RD_ATOMIC) == 0;
  if (!ok) {
    spdlog::warn("rdma: memory windows: binder QP setup failed: {}", std::strerror(errno));
    ibv_destroy_qp(qp);
    return nullptr;
  }
  return qp;
}

}  // namespace

Result<std::unique_ptr<MemoryWindows>> MemoryWindows::create(ibv_pd* pd, std::uint8_t port, int gid_index,
                                                             std::uint32_t count) {
  using R = Result<std::unique_ptr<MemoryWindows>>;
  std::unique_ptr<MemoryWindows> w(new MemoryWindows());
  ibv_device_attr dev{};
  if (ibv_query_device(pd->context, &dev) != 0 || (dev.device_cap_flags & IBV_DEVICE_MEM_WINDOW) == 0) {
    spdlog::info("rdma: the device has no memory windows");
    return R::fail(Status::NotSupported);
  }
  w->pd_ = pd;
  w->port_ = port;
  w->gid_index_ = gid_index;
  w->cq_ = ibv_create_cq(pd->context, 8, nullptr, nullptr, 0);
  if (w->cq_ == nullptr) return R::fail(Status::NotSupported);
  w->qp_ = self_connected_qp(pd, w->cq_, port, gid_index);
  if (w->qp_ == nullptr) return R::fail(Status::NotSupported);
  w->mws_.reserve(count);
  w->free_.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    ibv_mw* mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
    if (mw == nullptr) {
      spdlog::warn("rdma: memory windows: ibv_alloc_mw failed after {}: {}", i, std::strerror(errno));
      return R::fail(Status::NotSupported);
    }
    w->mws_.push_back(mw);
  }
  w->bound_to_.assign(count, nullptr);
  for (std::uint32_t slot = count; slot >= 1; --slot) w->free_.push_back(slot);
  return R::ok(std::move(w));
}

MemoryWindows::~MemoryWindows() {
  for (ibv_mw* mw : mws_) {
    if (mw != nullptr) ibv_dealloc_mw(mw);  // unbinds what is still open
  }
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
}

bool MemoryWindows::bind(ibv_mw* mw, const ibv_mw_bind_info& info) noexcept {
  ibv_mw_bind b{};
  b.wr_id = 1;
  b.send_flags = IBV_SEND_SIGNALED;
  b.bind_info = info;
  const std::uint32_t old_rkey = mw->rkey;
  if (const int rc = ibv_bind_mw(qp_, mw, &b); rc != 0) {
    spdlog::error("rdma: memory windows: ibv_bind_mw failed: {}", std::strerror(rc));
    return false;
  }
  ++binds_;
  ibv_wc wc{};
  int n = ibv_poll_cq(cq_, 1, &wc);
  if (n == 0) {
    // rxe completes a bind from a tasklet: yield so it runs.
    const auto deadline = std::chrono::steady_clock::now() + kBindWait;
    while ((n = ibv_poll_cq(cq_, 1, &wc)) == 0) {
      if (std::chrono::steady_clock::now() > deadline) break;
      ::sched_yield();
    }
  }
  if (n == 1 && wc.status == IBV_WC_SUCCESS) return true;
  // The provider advanced the key before the bind ran; the window's state
  // is now unknown, so it is not handed out again.
  spdlog::error("rdma: memory windows: bind (rkey {:#x}) {}; renewing the binder QP", old_rkey,
                n == 1 ? ibv_wc_status_str(wc.status) : "did not complete");
  renew_qp();
  return false;
}

void MemoryWindows::renew_qp() noexcept {
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  ibv_wc wc[8];
  while (ibv_poll_cq(cq_, 8, wc) > 0) {
  }
  qp_ = self_connected_qp(pd_, cq_, port_, gid_index_);
}

Result<Window> MemoryWindows::open(ibv_mr* mr, const void* addr, std::uint32_t len, int access) noexcept {
  if (free_.empty()) return Result<Window>::fail(Status::Busy);
  const std::uint32_t slot = free_.back();
  ibv_mw* mw = mws_[slot - 1];
  ibv_mw_bind_info info{};
  info.mr = mr;
  info.addr = reinterpret_cast<std::uintptr_t>(addr);
  info.length = len;
  info.mw_access_flags = access;
  if (qp_ == nullptr || !bind(mw, info)) return Result<Window>::fail(Status::ProtocolError);
  free_.pop_back();
  bound_to_[slot - 1] = mr;
  return Result<Window>::ok(Window{slot, mw->rkey});
}

void MemoryWindows::close(Window w) noexcept {
  if (w.slot == 0 || w.slot > mws_.size() || bound_to_[w.slot - 1] == nullptr) return;
  // A zero-length bind: the window reaches nothing and its key changes. It
  // names the MR (rxe's provider reads the MR's lkey even for an unbind).
  ibv_mw_bind_info none{};
  none.mr = bound_to_[w.slot - 1];
  none.addr = reinterpret_cast<std::uintptr_t>(none.mr->addr);
  bound_to_[w.slot - 1] = nullptr;
  ibv_mw*& mw = mws_[w.slot - 1];
  if (qp_ != nullptr && bind(mw, none)) {
    free_.push_back(w.slot);
    return;
  }
  // Its key may still be live: trade the window for a fresh one (dealloc
  // unbinds), so the buffer is closed either way.
  ibv_dealloc_mw(mw);
  mw = ibv_alloc_mw(pd_, IBV_MW_TYPE_1);
  if (mw != nullptr) free_.push_back(w.slot);
}

}  // namespace ferry::transport::rdma
