#include "daemon/segment_mr.h"

#include "ferry_config.h"
#if FERRY_HAVE_RDMA
#include "transport/rdma/memory.h"
#endif

namespace ferry::daemon {

#if FERRY_HAVE_RDMA

SegmentMr::~SegmentMr() {
  transport::rdma::deregister_region(tx_);
  transport::rdma::deregister_region(rx_);
}

Status SegmentMr::make(ibv_pd* pd, void* tx, std::size_t tx_len, void* rx, std::size_t rx_len, bool windows,
                       SegmentMr* out, std::string* why) {
  namespace rdma = transport::rdma;
  SegmentMr m;
  auto t = rdma::register_region(pd, tx, tx_len, windows ? rdma::kWindowAccess : rdma::kRemoteAccess);
  if (t) m.tx_ = t.value;
  auto r = t ? rdma::register_region(pd, rx, rx_len, rdma::kLocalAccess) : t;
  if (!t || !r) {
    *why = std::string(to_string(!t ? t.status : r.status)) + " (the transport logged why)";
    return Status::NoMemory;  // `m` deregisters what did succeed
  }
  m.rx_ = r.value;
  *out = std::move(m);
  return Status::Ok;
}

transport::MemoryHandle SegmentMr::tx() const noexcept { return transport::rdma::handle_of(tx_); }
transport::MemoryHandle SegmentMr::rx() const noexcept { return transport::rdma::handle_of(rx_); }

#else

SegmentMr::~SegmentMr() = default;

Status SegmentMr::make(ibv_pd*, void*, std::size_t, void*, std::size_t, bool, SegmentMr*, std::string* why) {
  *why = "built without rdma support";
  return Status::NotSupported;
}

transport::MemoryHandle SegmentMr::tx() const noexcept { return {}; }
transport::MemoryHandle SegmentMr::rx() const noexcept { return {}; }

#endif

SegmentMr& SegmentMr::operator=(SegmentMr&& o) noexcept {
  if (this != &o) {
    SegmentMr gone(std::move(*this));
    tx_ = o.tx_;
    rx_ = o.rx_;
    o.tx_ = o.rx_ = nullptr;
  }
  return *this;
}

}  // namespace ferry::daemon
