#include "daemon/segment_mr.h"

#include <cerrno>
#include <cstring>

#include "ferry_config.h"
#if FERRY_HAVE_RDMA
#include <infiniband/verbs.h>
#endif

namespace ferry::daemon {

SegmentMr::~SegmentMr() {
#if FERRY_HAVE_RDMA
  if (mr_ != nullptr) ibv_dereg_mr(mr_);
#endif
}

SegmentMr& SegmentMr::operator=(SegmentMr&& o) noexcept {
  if (this != &o) {
    SegmentMr gone(std::move(*this));
    mr_ = o.mr_;
    o.mr_ = nullptr;
  }
  return *this;
}

Status SegmentMr::make(ibv_pd* pd, void* addr, std::size_t len, SegmentMr* out, std::string* why) {
#if FERRY_HAVE_RDMA
  ibv_mr* mr = ibv_reg_mr(pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr) {
    *why = std::strerror(errno);
    return Status::NoMemory;
  }
  *out = SegmentMr();
  out->mr_ = mr;
  return Status::Ok;
#else
  (void)pd, (void)addr, (void)len, (void)out;
  *why = "built without rdma support";
  return Status::NotSupported;
#endif
}

transport::MemoryHandle SegmentMr::handle() const noexcept {
  transport::MemoryHandle h;
#if FERRY_HAVE_RDMA
  if (mr_ != nullptr) {
    h.id = reinterpret_cast<std::uintptr_t>(mr_);
    h.lkey = mr_->lkey;
    h.rkey = mr_->rkey;
  }
#endif
  return h;
}

}  // namespace ferry::daemon
