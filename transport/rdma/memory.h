// Memory registration: user regions (register_memory) and the transport's
// own slabs (receive slots, send header/bounce slots). Control path.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

#include "ferry/result.h"
#include "transport/transport.h"

namespace ferry::transport::rdma {

// ibv_reg_mr with `access` (default: local write and remote read/write, for
// memory a peer names; the transport's own slabs are local only). BadRequest
// for a null/empty region; NoMemory when pinning fails (ENOMEM/EAGAIN/EPERM),
// with an error log naming RLIMIT_MEMLOCK and its current value, since that
// limit is the usual cause outside root.
inline constexpr int kRemoteAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
// Local write only: the NIC may fill it (our READs), a peer can name none of it.
inline constexpr int kLocalAccess = IBV_ACCESS_LOCAL_WRITE;
// Local write and memory-window binds: a peer reaches it only through a window.
inline constexpr int kWindowAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
[[nodiscard]] Result<ibv_mr*> register_region(ibv_pd* pd, void* addr, std::size_t len, int access = kRemoteAccess);
// Undoes register_region (nullptr: nothing). Fails only while a window is
// still bound to it, which its owner's ordering rules out (logged).
void deregister_region(ibv_mr* mr) noexcept;
// A registration's keys as the transport interface names them.
MemoryHandle handle_of(const ibv_mr* mr) noexcept;

// A page-aligned, zeroed, registered block carved into fixed slots by its
// owner. Move-only; deregisters and unmaps on destruction.
class RegisteredSlab {
 public:
  RegisteredSlab() = default;
  ~RegisteredSlab() { reset(); }
  RegisteredSlab(const RegisteredSlab&) = delete;
  RegisteredSlab& operator=(const RegisteredSlab&) = delete;

  // NoMemory when the mapping or the registration fails.
  [[nodiscard]] Status init(ibv_pd* pd, std::size_t bytes);
  // Deregisters and unmaps now (before the PD goes away).
  void reset() noexcept;

  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return bytes_; }
  std::uint32_t lkey() const noexcept { return mr_ == nullptr ? 0 : mr_->lkey; }

 private:
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
  ibv_mr* mr_ = nullptr;
};

}  // namespace ferry::transport::rdma
