// The remote keys ferry gives a peer daemon for a client's memory.
//
// With memory windows (rdma, the default where the device has them) every
// buffer a call exposes gets its own key, for that buffer only, with only
// the access it needs (the response buffer: remote write; a rendezvous
// source: remote read): bound before the call is sent, invalidated once the
// peer has answered (remote_sender.h). The tx arena's MR itself then grants
// nothing remote (segment_mr.h). Without them (rdma-windows 0, or a device
// without type 1 windows) the key is the tx arena's.
//
// Binding never waits (transport/rdma/memory_windows.h): open() and close()
// post, and poll() reports each one done with the cookie it was posted
// with. A key is sent only once its open is reported, and the memory goes
// back to its client (or its MR away) only once its close is.
//
// enable() runs before the engine thread starts; per_call() is then read by
// the attach thread too (how to register a segment). The rest: engine
// thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "ferry/result.h"

struct ibv_pd;

namespace ferry::transport::rdma {
class MemoryWindows;
}

namespace ferry::daemon {

class SegmentMr;

struct RemoteKey {
  std::uint32_t slot = 0;  // 0: none
  std::uint32_t rkey = 0;
};

// An open or close that finished.
struct KeyDone {
  std::uint64_t cookie = 0;
  bool closed = false;  // a close; else an open
  bool ok = true;       // an open that failed: its key opens nothing (close it anyway)
};

class RemoteKeys {
 public:
  RemoteKeys() = default;
  ~RemoteKeys();
  RemoteKeys(const RemoteKeys&) = delete;
  RemoteKeys& operator=(const RemoteKeys&) = delete;
  RemoteKeys(RemoteKeys&& o) noexcept : windows_(std::exchange(o.windows_, nullptr)) {}
  RemoteKeys& operator=(RemoteKeys&& o) noexcept {
    if (this != &o) {
      disable();
      windows_ = std::exchange(o.windows_, nullptr);
    }
    return *this;
  }

  // `count` windows on `pd` (port 1, source GID `gid_index`). false (logged)
  // when the device cannot: keys stay arena-wide.
  [[nodiscard]] bool enable(ibv_pd* pd, int gid_index, std::uint32_t count);
  bool per_call() const noexcept { return windows_ != nullptr; }
  // Frees every window (open ones too): at shutdown, before the MRs they
  // are bound to are deregistered (a bound window keeps its MR).
  void disable() noexcept;

  // A key to [addr, addr + len) of `mr`'s tx arena: remote write (a response
  // buffer) or remote read (a rendezvous source); usable once poll()
  // reports `cookie` opened. Busy when every window is in use.
  [[nodiscard]] Result<RemoteKey> open(const SegmentMr& mr, const std::byte* addr, std::uint32_t len, bool remote_write,
                                       std::uint64_t cookie) noexcept;
  // Every key open() returned is closed once; it is dead when poll()
  // reports `cookie` closed.
  void close(RemoteKey key, std::uint64_t cookie) noexcept;
  [[nodiscard]] std::size_t poll(std::span<KeyDone> out) noexcept;
  std::uint32_t pending() const noexcept;  // opens and closes not reported yet
  std::uint32_t open_count() const noexcept;

 private:
  transport::rdma::MemoryWindows* windows_ = nullptr;  // owned; null: arena-wide keys
};

}  // namespace ferry::daemon
