#include "daemon/segment_mr.h"

#include <cerrno>
#include <cstring>

#include "ferry_config.h"
#if FERRY_HAVE_RDMA
#include <infiniband/verbs.h>
#endif

namespace ferry::daemon {

namespace {

transport::MemoryHandle handle_of(ibv_mr* mr) noexcept {
  transport::MemoryHandle h;
#if FERRY_HAVE_RDMA
  if (mr != nullptr) {
    h.id = reinterpret_cast<std::uintptr_t>(mr);
    h.lkey = mr->lkey;
    h.rkey = mr->rkey;
  }
#else
  (void)mr;
#endif
  return h;
}

}  // namespace

SegmentMr::~SegmentMr() {
#if FERRY_HAVE_RDMA
  if (tx_ != nullptr) ibv_dereg_mr(tx_);
  if (rx_ != nullptr) ibv_dereg_mr(rx_);
#endif
}

SegmentMr& SegmentMr::operator=(SegmentMr&& o) noexcept {
  if (this != &o) {
    SegmentMr gone(std::move(*this));
    tx_ = o.tx_;
    rx_ = o.rx_;
    o.tx_ = o.rx_ = nullptr;
  }
  return *this;
}

Status SegmentMr::make(ibv_pd* pd, void* tx, std::size_t tx_len, void* rx, std::size_t rx_len, bool windows,
                       SegmentMr* out, std::string* why) {
#if FERRY_HAVE_RDMA
  SegmentMr m;
  const int remote = windows ? IBV_ACCESS_MW_BIND : IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  m.tx_ = ibv_reg_mr(pd, tx, tx_len, IBV_ACCESS_LOCAL_WRITE | remote);
  if (m.tx_ != nullptr) m.rx_ = ibv_reg_mr(pd, rx, rx_len, IBV_ACCESS_LOCAL_WRITE);
  if (m.tx_ == nullptr || m.rx_ == nullptr) {
    *why = std::strerror(errno);
    return Status::NoMemory;  // `m` deregisters what did succeed
  }
  *out = std::move(m);
  return Status::Ok;
#else
  (void)pd, (void)tx, (void)tx_len, (void)rx, (void)rx_len, (void)windows, (void)out;
  *why = "built without rdma support";
  return Status::NotSupported;
#endif
}

transport::MemoryHandle SegmentMr::tx() const noexcept { return handle_of(tx_); }
transport::MemoryHandle SegmentMr::rx() const noexcept { return handle_of(rx_); }

}  // namespace ferry::daemon
