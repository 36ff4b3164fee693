#include "transport/rdma/memory_windows.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace ferry::transport::rdma {

namespace {

// An RC QP connected to itself, in RTS: what ibv_bind_mw posts on.
ibv_qp* self_connected_qp(ibv_pd* pd, ibv_cq* cq, std::uint8_t port, int gid_index, std::uint32_t depth) {
  ibv_qp_init_attr a{};
  a.send_cq = cq;
  a.recv_cq = cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = depth;
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

int access_of(WindowAccess a) noexcept {
  return a == WindowAccess::RemoteWrite ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
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
  // Every window may have a bind and an unbind pending at once.
  w->depth_ = std::min<std::uint32_t>(2 * count + 8, static_cast<std::uint32_t>(std::max(dev.max_qp_wr, 16)));
  if (w->depth_ < 2 * count + 8) count = (w->depth_ - 8) / 2;
  const int cqe = std::min(static_cast<int>(w->depth_), std::max(dev.max_cqe, 16));
  w->cq_ = ibv_create_cq(pd->context, cqe, nullptr, nullptr, 0);
  if (w->cq_ == nullptr) return R::fail(Status::NotSupported);
  w->qp_ = self_connected_qp(pd, w->cq_, port, gid_index, w->depth_);
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
  w->tainted_.assign(count, false);
  w->ring_.assign(w->depth_, Pending{});
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

bool MemoryWindows::post(ibv_mw* mw, const ibv_mw_bind_info& info, std::uint64_t wr_id) noexcept {
  if (qp_ == nullptr || broken_) return false;
  ibv_mw_bind b{};
  b.wr_id = wr_id;
  b.send_flags = IBV_SEND_SIGNALED;
  b.bind_info = info;
  if (const int rc = ibv_bind_mw(qp_, mw, &b); rc != 0) {
    spdlog::error("rdma: memory windows: ibv_bind_mw failed: {}", std::strerror(rc));
    broken_ = true;
    return false;
  }
  ++binds_;
  return true;
}

Result<Window> MemoryWindows::bind(ibv_mr* mr, const void* addr, std::uint32_t len, WindowAccess access,
                                   std::uint64_t cookie) noexcept {
  if (free_.empty() || broken_ || qp_ == nullptr) return Result<Window>::fail(Status::Busy);
  const std::uint32_t slot = free_.back();
  ibv_mw* mw = mws_[slot - 1];
  ibv_mw_bind_info info{};
  info.mr = mr;
  info.addr = reinterpret_cast<std::uintptr_t>(addr);
  info.length = len;
  info.mw_access_flags = access_of(access);
  if (!post(mw, info, slot)) return Result<Window>::fail(Status::ProtocolError);
  free_.pop_back();
  bound_to_[slot - 1] = mr;
  ring_[(head_ + pending_++) % depth_] = Pending{cookie, slot, false, true};
  return Result<Window>::ok(Window{slot, mw->rkey});  // the new key: ibv_bind_mw sets it at post
}

void MemoryWindows::unbind(Window w, std::uint64_t cookie) noexcept {
  if (w.slot == 0 || w.slot > mws_.size() || bound_to_[w.slot - 1] == nullptr) return;
  // A zero-length bind: the window reaches nothing and its key changes. It
  // names the MR (rxe's provider reads the MR's lkey even for an unbind).
  ibv_mw_bind_info none{};
  none.mr = bound_to_[w.slot - 1];
  none.addr = reinterpret_cast<std::uintptr_t>(none.mr->addr);
  const bool posted = post(mws_[w.slot - 1], none, w.slot);
  ring_[(head_ + pending_++) % depth_] = Pending{cookie, w.slot, true, posted};
}

void MemoryWindows::replace(std::uint32_t slot) noexcept {
  ibv_mw*& mw = mws_[slot - 1];
  ibv_dealloc_mw(mw);  // unbinds it, whatever state it was left in
  mw = ibv_alloc_mw(pd_, IBV_MW_TYPE_1);
}

bool MemoryWindows::pop(bool ok, WindowDone& out) noexcept {
  const Pending p = ring_[head_];
  head_ = (head_ + 1) % depth_;
  --pending_;
  out = WindowDone{p.cookie, p.unbind, ok};
  const std::uint32_t i = p.slot - 1;
  if (!p.unbind) {
    if (!ok) tainted_[i] = true;  // its unbind replaces it
    return true;
  }
  bound_to_[i] = nullptr;
  if (!ok || tainted_[i]) {
    // Its key may still be live: trade the window for a fresh one, so the
    // buffer is closed either way.
    replace(i + 1);
    tainted_[i] = false;
    out.ok = true;
  }
  if (mws_[i] != nullptr) free_.push_back(p.slot);
  return true;
}

std::size_t MemoryWindows::poll(std::span<WindowDone> out) noexcept {
  std::size_t n = 0;
  while (n < out.size() && pending_ != 0) {
    if (!ring_[head_].posted) {  // refused at post: ends here, in its turn
      pop(false, out[n++]);
      continue;
    }
    ibv_wc wc{};
    if (ibv_poll_cq(cq_, 1, &wc) != 1) break;
    const bool ok = wc.status == IBV_WC_SUCCESS;
    if (!ok && wc.status != IBV_WC_WR_FLUSH_ERR) {
      spdlog::error("rdma: memory windows: a bind completed {}; renewing the binder QP", ibv_wc_status_str(wc.status));
    }
    if (!ok) broken_ = true;
    pop(ok, out[n++]);
  }
  if (broken_ && pending_ == 0) renew_qp();
  return n;
}

void MemoryWindows::renew_qp() noexcept {
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  std::array<ibv_wc, 8> wc;
  while (ibv_poll_cq(cq_, static_cast<int>(wc.size()), wc.data()) > 0) {
  }
  qp_ = self_connected_qp(pd_, cq_, port_, gid_index_, depth_);
  broken_ = qp_ == nullptr;
}

}  // namespace ferry::transport::rdma
