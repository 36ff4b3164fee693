// Memory windows: remote keys scoped to one buffer for one operation.
//
// A client's tx arena is registered without remote access (IBV_ACCESS_MW_BIND
// only), so its MR's rkey opens nothing. For each call that exposes a buffer
// to a peer (a response buffer the peer RDMA-WRITEs, a rendezvous source it
// RDMA-READs) the daemon binds a window over exactly that range with exactly
// that access and sends the window's rkey; when the peer has answered it
// invalidates the window, and the rkey is dead: a late or forged access
// through it fails at the NIC (remote access error), whatever else the arena
// holds.
//
// Type 1 windows (bound with ibv_bind_mw): a type 2 window belongs to the QP
// it was bound through, and a lane rebuilt on a new QP must keep reaching the
// buffers of the calls it resends. Binds go through a private RC QP connected
// to itself, never through a data lane: a lane may break with a bind queued
// behind it. Nothing here waits: bind() and unbind() post, and poll() (a CQ
// poll, no system call) reports each one done, in post order, with the
// cookie it was posted with. The caller sends a window's key only once its
// bind is reported, and hands the buffer back (or deregisters the MR) only
// once its unbind is: the window reaches the buffer exactly between the two.
// Every rebind changes the key byte of the rkey, so an old rkey never matches
// a reused window.
//
// Owner thread only (the engine's).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ferry/result.h"

namespace ferry::transport::rdma {

enum class WindowAccess : std::uint8_t { RemoteRead, RemoteWrite };

struct Window {
  std::uint32_t slot = 0;  // 0: none
  std::uint32_t rkey = 0;
};

// A bind or unbind that finished (poll()).
struct WindowDone {
  std::uint64_t cookie = 0;
  bool unbind = false;
  bool ok = true;  // false: the bind failed (its key opens nothing); an unbind always ends closed
};

class MemoryWindows {
 public:
  // `count` type 1 windows on `pd` and the binder QP on `port` (its GID
  // `gid_index` addresses the QP to itself). NotSupported when the device
  // has no type 1 windows or the QP cannot reach RTS; the caller then keeps
  // arena-wide keys and says so.
  [[nodiscard]] static Result<std::unique_ptr<MemoryWindows>> create(ibv_pd* pd, std::uint8_t port, int gid_index,
                                                                     std::uint32_t count);
  ~MemoryWindows();
  MemoryWindows(const MemoryWindows&) = delete;
  MemoryWindows& operator=(const MemoryWindows&) = delete;

  // Posts the bind of a free window over [addr, addr + len) of `mr`. Its key
  // comes back now and reaches the buffer once poll() reports `cookie`
  // bound. Busy when every window is in use; ProtocolError when the bind
  // could not be posted (logged).
  [[nodiscard]] Result<Window> bind(ibv_mr* mr, const void* addr, std::uint32_t len, WindowAccess access,
                                    std::uint64_t cookie) noexcept;
  // Posts the invalidation of a window bind() returned (its bind may still
  // be pending: they run in order). The window is free again, and its key
  // dead, once poll() reports `cookie` unbound.
  void unbind(Window w, std::uint64_t cookie) noexcept;
  // Binds and unbinds that finished, in post order. Never blocks.
  [[nodiscard]] std::size_t poll(std::span<WindowDone> out) noexcept;
  // Binds or unbinds posted and not reported yet.
  std::uint32_t pending() const noexcept { return pending_; }

  std::uint32_t open_count() const noexcept { return static_cast<std::uint32_t>(mws_.size() - free_.size()); }
  std::uint64_t binds() const noexcept { return binds_; }

 private:
  MemoryWindows() = default;
  bool post(ibv_mw* mw, const ibv_mw_bind_info& info, std::uint64_t wr_id) noexcept;
  void renew_qp() noexcept;  // a failed bind leaves the binder QP in error
  // A window whose last bind failed: its state is unknown, so it is traded
  // for a fresh one (dealloc unbinds), which makes it free again.
  void replace(std::uint32_t slot) noexcept;

  // A bind or unbind posted (or refused by the post: `posted` false), in
  // post order: the binder QP completes them in that order.
  struct Pending {
    std::uint64_t cookie = 0;
    std::uint32_t slot = 0;
    bool unbind = false;
    bool posted = true;
  };
  bool pop(bool ok, WindowDone& out) noexcept;

  ibv_pd* pd_ = nullptr;
  std::uint8_t port_ = 1;
  int gid_index_ = 0;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  std::uint32_t depth_ = 0;          // the binder QP's send queue: a bind and an unbind per window
  std::vector<ibv_mw*> mws_;         // slot - 1
  std::vector<ibv_mr*> bound_to_;    // slot - 1: the MR a window in use is bound to
  std::vector<bool> tainted_;        // slot - 1: its bind failed; replaced when its unbind is done
  std::vector<std::uint32_t> free_;  // free slots
  std::vector<Pending> ring_;        // depth_ entries
  std::uint32_t head_ = 0;           // the oldest pending
  std::uint32_t pending_ = 0;
  bool broken_ = false;  // a post or completion failed: the QP is renewed once nothing is pending
  std::uint64_t binds_ = 0;
};

}  // namespace ferry::transport::rdma
