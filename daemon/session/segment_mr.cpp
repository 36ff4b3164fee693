#include "daemon/session/segment_mr.h"

#include "ferry_config.h"
#if FERRY_HAVE_RDMA
#include "transport/rdma/memory.h"
#endif

namespace ferry::daemon {

#if FERRY_HAVE_RDMA

SegmentMr::~SegmentMr() {
  for (ibv_mr* mr : tx_) transport::rdma::deregister_region(mr);
  for (ibv_mr* mr : rx_) transport::rdma::deregister_region(mr);
}

Error SegmentMr::make(std::span<ibv_pd* const> pds, void* tx, std::size_t tx_len, void* rx, std::size_t rx_len,
                      bool windows, SegmentMr* out) {
  namespace rdma = transport::rdma;
  SegmentMr m;
  for (std::size_t i = 0; i < pds.size() && i < m.tx_.size() && pds[i] != nullptr; ++i) {
    auto t = rdma::register_region(pds[i], tx, tx_len, windows ? rdma::kWindowAccess : rdma::kRemoteAccess);
    if (t) m.tx_[i] = t.value;
    auto r = t ? rdma::register_region(pds[i], rx, rx_len, rdma::kLocalAccess) : t;
    if (!t || !r) {
      // `m` deregisters what did succeed.
      return Error(Status::NoMemory, std::string(to_string(!t ? t.status : r.status)) + " (the transport logged why)" +
                                         (i == 0 ? std::string() : " on rail " + std::to_string(i)));
    }
    m.rx_[i] = r.value;
  }
  *out = std::move(m);
  return {};
}

transport::MemoryHandle SegmentMr::handle(const Mrs& mrs) noexcept {
  transport::MemoryHandle h = transport::rdma::handle_of(mrs[0]);
  for (std::size_t i = 0; i < mrs.size(); ++i) h.rail_lkey[i] = mrs[i] != nullptr ? mrs[i]->lkey : 0;
  return h;
}

transport::MemoryHandle SegmentMr::tx() const noexcept { return handle(tx_); }
transport::MemoryHandle SegmentMr::rx() const noexcept { return handle(rx_); }
std::uint32_t SegmentMr::tx_rkey(std::uint32_t rail) const noexcept {
  return rail < tx_.size() && tx_[rail] != nullptr ? tx_[rail]->rkey : 0;
}
std::uint64_t SegmentMr::tx_addr() const noexcept {
  return tx_[0] != nullptr ? reinterpret_cast<std::uintptr_t>(tx_[0]->addr) : 0;
}
std::uint64_t SegmentMr::tx_length() const noexcept { return tx_[0] != nullptr ? tx_[0]->length : 0; }

#else

SegmentMr::~SegmentMr() = default;

Error SegmentMr::make(std::span<ibv_pd* const>, void*, std::size_t, void*, std::size_t, bool, SegmentMr*) {
  return Error(Status::NotSupported, "built without rdma support");
}

transport::MemoryHandle SegmentMr::tx() const noexcept { return {}; }
transport::MemoryHandle SegmentMr::rx() const noexcept { return {}; }
std::uint32_t SegmentMr::tx_rkey(std::uint32_t) const noexcept { return 0; }
std::uint64_t SegmentMr::tx_addr() const noexcept { return 0; }
std::uint64_t SegmentMr::tx_length() const noexcept { return 0; }

#endif

SegmentMr& SegmentMr::operator=(SegmentMr&& o) noexcept {
  if (this != &o) {
    SegmentMr gone(std::move(*this));
    tx_ = o.tx_;
    rx_ = o.rx_;
    o.tx_ = o.rx_ = {};
  }
  return *this;
}

}  // namespace ferry::daemon
