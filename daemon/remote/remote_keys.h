// The remote keys ferry gives a peer daemon for a client's memory.
//
// With memory windows (rdma, the default where the device has them) every
// buffer a call exposes gets its own key, for that buffer only, with only
// the access it needs (the response buffer: remote write; a rendezvous
// source: remote read), opened just before the call is posted and closed
// when the peer has answered (remote_send.cpp, finish_remote_op). The tx
// arena's MR itself then grants nothing remote (segment_mr.h). Without them
// (rdma-windows 0, or a device without type 1 windows) the key is the tx
// arena's, as before. transport/rdma/memory_windows.h has the mechanics.
//
// enable() runs before the engine thread starts; per_call() is then read by
// the attach thread too (how to register a segment). open/close: engine
// thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "ferry/status.h"

struct ibv_pd;

namespace ferry::transport::rdma {
class MemoryWindows;
}

namespace ferry::daemon {

class SegmentMr;

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
  // buffer) or remote read (a rendezvous source). Busy when every window is
  // open (the op waits); ProtocolError when the device refused the bind.
  [[nodiscard]] Status open(const SegmentMr& mr, const std::byte* addr, std::uint32_t len, bool remote_write,
                            std::uint32_t* slot, std::uint32_t* rkey) noexcept;
  void close(std::uint32_t slot) noexcept;  // 0: nothing
  std::uint32_t open_count() const noexcept;

 private:
  transport::rdma::MemoryWindows* windows_ = nullptr;  // owned; null: arena-wide keys
};

}  // namespace ferry::daemon
