// Memory windows: remote keys scoped to one buffer for one operation.
//
// A client's tx arena is registered without remote access (IBV_ACCESS_MW_BIND
// only), so its MR's rkey opens nothing. For each call that exposes a buffer
// to a peer (a response buffer the peer RDMA-WRITEs, a rendezvous source it
// RDMA-READs) the engine opens a window over exactly that range with exactly
// that access and sends the window's rkey; when the peer has answered it
// closes the window, and the rkey is dead: a late or forged access through
// it fails at the NIC (remote access error), whatever else the arena holds.
//
// Type 1 windows (bound with ibv_bind_mw): a type 2 window belongs to the QP
// it was bound through, and a lane rebuilt on a new QP (channel_rebuild.cpp)
// must keep reaching the buffers of the calls it resends. Binds go through a
// private RC QP connected to itself, never through a data lane: a lane may
// break with a bind queued behind it. Each bind and unbind waits for its
// completion (a local operation; on rxe it finishes inside the post), so a
// window is usable once open() returns and gone once close() returns, before
// the caller may hand the memory back or deregister the MR. Every rebind
// changes the key byte of the rkey, so an old rkey never matches a reused
// window.
//
// Engine thread only.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "ferry/result.h"

namespace ferry::transport::rdma {

struct Window {
  std::uint32_t slot = 0;  // 0: none
  std::uint32_t rkey = 0;
};

class MemoryWindows {
 public:
  // `count` type 1 windows on `pd` and the binder QP on `port` (its GID
  // `gid_index` addresses the QP to itself). NotSupported when the device
  // has no type 1 windows or the QP cannot reach RTS; the caller then keeps
  // arena-wide keys and says so.
  static Result<std::unique_ptr<MemoryWindows>> create(ibv_pd* pd, std::uint8_t port, int gid_index,
                                                       std::uint32_t count);
  ~MemoryWindows();
  MemoryWindows(const MemoryWindows&) = delete;
  MemoryWindows& operator=(const MemoryWindows&) = delete;

  // Opens a window over [addr, addr + len) of `mr` with `access`
  // (IBV_ACCESS_REMOTE_READ and/or IBV_ACCESS_REMOTE_WRITE). Busy when every
  // window is open; ProtocolError when the bind failed (logged).
  [[nodiscard]] Result<Window> open(ibv_mr* mr, const void* addr, std::uint32_t len, int access) noexcept;
  // Invalidates it (a zero-length bind) and returns it to the pool.
  void close(Window w) noexcept;

  std::uint32_t open_count() const noexcept { return static_cast<std::uint32_t>(mws_.size() - free_.size()); }
  std::uint64_t binds() const noexcept { return binds_; }

 private:
  MemoryWindows() = default;
  bool bind(ibv_mw* mw, const ibv_mw_bind_info& info) noexcept;  // posts and waits
  void renew_qp() noexcept;                                      // a failed bind leaves the binder QP in error

  ibv_pd* pd_ = nullptr;
  std::uint8_t port_ = 1;
  int gid_index_ = 0;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  std::vector<ibv_mw*> mws_;         // slot - 1
  std::vector<ibv_mr*> bound_to_;    // slot - 1: the MR an open window is bound to
  std::vector<std::uint32_t> free_;  // free slots
  std::uint64_t binds_ = 0;
};

}  // namespace ferry::transport::rdma
