#include "daemon/remote/remote_keys.h"

#include <spdlog/spdlog.h>

#include "daemon/segment_mr.h"
#include "ferry_config.h"
#if FERRY_HAVE_RDMA
#include "transport/rdma/memory_windows.h"
#endif

namespace ferry::daemon {

#if FERRY_HAVE_RDMA

RemoteKeys::~RemoteKeys() { disable(); }

void RemoteKeys::disable() noexcept {
  delete windows_;
  windows_ = nullptr;
}

bool RemoteKeys::enable(ibv_pd* pd, int gid_index, std::uint32_t count) {
  if (pd == nullptr) return false;
  if (count == 0 || gid_index < 0) {
    spdlog::info("rdma: remote keys scoped to each client's tx arena ({})",
                 count == 0 ? "rdma-windows 0" : "no source GID for the windows' QP");
    return false;
  }
  auto w = transport::rdma::MemoryWindows::create(pd, 1, gid_index, count);
  if (!w) {
    spdlog::warn("rdma: no memory windows on this device ({}): peers get keys to a client's whole tx arena",
                 to_string(w.status));
    return false;
  }
  windows_ = w.value.release();
  spdlog::info("rdma: remote keys scoped per call: {} memory windows (type 1)", count);
  return true;
}

Status RemoteKeys::open(const SegmentMr& mr, const std::byte* addr, std::uint32_t len, bool remote_write,
                        std::uint32_t* slot, std::uint32_t* rkey) noexcept {
  const auto w = windows_->open(mr.tx_mr(), addr, len, remote_write ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ);
  if (!w) return w.status;
  *slot = w.value.slot;
  *rkey = w.value.rkey;
  return Status::Ok;
}

void RemoteKeys::close(std::uint32_t slot) noexcept {
  if (slot != 0 && windows_ != nullptr) windows_->close(transport::rdma::Window{slot, 0});
}

std::uint32_t RemoteKeys::open_count() const noexcept { return windows_ != nullptr ? windows_->open_count() : 0; }

#else

RemoteKeys::~RemoteKeys() = default;
void RemoteKeys::disable() noexcept {}
bool RemoteKeys::enable(ibv_pd*, int, std::uint32_t) { return false; }
Status RemoteKeys::open(const SegmentMr&, const std::byte*, std::uint32_t, bool, std::uint32_t*,
                        std::uint32_t*) noexcept {
  return Status::NotSupported;
}
void RemoteKeys::close(std::uint32_t) noexcept {}
std::uint32_t RemoteKeys::open_count() const noexcept { return 0; }

#endif

}  // namespace ferry::daemon
