#include "daemon/remote/remote_keys.h"

#include <spdlog/spdlog.h>

#include <array>

#include "daemon/session/segment_mr.h"
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
  spdlog::info("rdma: remote keys scoped per call: {} memory windows (type 1, bound without waiting)", count);
  return true;
}

Result<RemoteKey> RemoteKeys::open(const SegmentMr& mr, const std::byte* addr, std::uint32_t len, bool remote_write,
                                   std::uint64_t cookie) noexcept {
  using transport::rdma::WindowAccess;
  const auto w = windows_->bind(mr.tx_mr(), addr, len,
                                remote_write ? WindowAccess::RemoteWrite : WindowAccess::RemoteRead, cookie);
  if (!w) return Result<RemoteKey>::fail(w.status);
  return Result<RemoteKey>::ok(RemoteKey{w.value.slot, w.value.rkey});
}

void RemoteKeys::close(RemoteKey key, std::uint64_t cookie) noexcept {
  if (key.slot != 0 && windows_ != nullptr) windows_->unbind(transport::rdma::Window{key.slot, key.rkey}, cookie);
}

std::size_t RemoteKeys::poll(std::span<KeyDone> out) noexcept {
  if (windows_ == nullptr || windows_->pending() == 0) return 0;
  std::array<transport::rdma::WindowDone, 32> done;
  const std::size_t n =
      windows_->poll(std::span<transport::rdma::WindowDone>(done.data(), std::min(done.size(), out.size())));
  for (std::size_t i = 0; i < n; ++i) out[i] = KeyDone{done[i].cookie, done[i].unbind, done[i].ok};
  return n;
}

std::uint32_t RemoteKeys::pending() const noexcept { return windows_ != nullptr ? windows_->pending() : 0; }
std::uint32_t RemoteKeys::open_count() const noexcept { return windows_ != nullptr ? windows_->open_count() : 0; }

#else

RemoteKeys::~RemoteKeys() = default;
void RemoteKeys::disable() noexcept {}
bool RemoteKeys::enable(ibv_pd*, int, std::uint32_t) { return false; }
Result<RemoteKey> RemoteKeys::open(const SegmentMr&, const std::byte*, std::uint32_t, bool, std::uint64_t) noexcept {
  return Result<RemoteKey>::fail(Status::NotSupported);
}
void RemoteKeys::close(RemoteKey, std::uint64_t) noexcept {}
std::size_t RemoteKeys::poll(std::span<KeyDone>) noexcept { return 0; }
std::uint32_t RemoteKeys::pending() const noexcept { return 0; }
std::uint32_t RemoteKeys::open_count() const noexcept { return 0; }

#endif

}  // namespace ferry::daemon
