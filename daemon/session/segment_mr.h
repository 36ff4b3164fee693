// A client segment's memory registrations on the rdma data transport: made
// once at attach (control thread; ibv_reg_mr is thread-safe and touches no
// state of the transport's owner thread), released when the session is
// destroyed. Eager remote Sends/Calls/Replies then post the payload SGE
// straight from the client's tx arena with its lkey: no bounce copy.
//
// Scoped as narrowly as the device allows (docs/security.md): with memory
// windows the tx arena is registered for window binds only and a peer gets a
// key per exposed buffer per call (remote_keys.h); without them only the tx
// arena is reachable by peers (remote read: rendezvous sources; remote
// write: response buffers, both always in the client's tx range), through
// tx().rkey. The rx arena is registered for local write only (the daemon's
// own RDMA READs land there) and the rings and segment header not at all, so
// a peer daemon can neither read what other clients sent this one nor touch
// the rings.
//
// With several rails (docs/rails.md) both arenas are registered on every
// rail's PD: tx()/rx() carry each rail's lkey (MemoryHandle::rail_lkey, the
// rail set posts with the one of the WR's rail) and tx_rkey(rail) is the key
// a peer uses through a lane on that rail.
//
// The session must outlive every WR that names these keys: the engine counts
// them (ClientSession::zc_inflight) and keeps a detached session retired
// until they have completed (engine.h, zc_*).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>

#include "ferry/error.h"
#include "ferry/status.h"
#include "transport/transport.h"

struct ibv_mr;
struct ibv_pd;

namespace ferry::daemon {

class SegmentMr {
 public:
  SegmentMr() = default;
  ~SegmentMr();
  SegmentMr(SegmentMr&& o) noexcept : tx_(o.tx_), rx_(o.rx_) { o.tx_ = o.rx_ = {}; }
  SegmentMr& operator=(SegmentMr&& o) noexcept;
  SegmentMr(const SegmentMr&) = delete;
  SegmentMr& operator=(const SegmentMr&) = delete;

  // Registers the tx arena [tx, tx+tx_len) for local write and either
  // memory-window binds (`windows`: per-call keys, remote_keys.h; the MR's
  // own rkey then grants nothing) or remote read/write, the rx arena
  // [rx, rx+rx_len) for local write only, on each of `pds` (the rails';
  // null entries end the list), into *out. NoMemory when the device
  // refuses (pinned-memory limit, MR count); NotSupported without rdma
  // support; the message says which.
  [[nodiscard]] static Error make(std::span<ibv_pd* const> pds, void* tx, std::size_t tx_len, void* rx,
                                  std::size_t rx_len, bool windows, SegmentMr* out);

  bool valid() const noexcept { return tx_[0] != nullptr; }
  // Keys of the tx arena: lkey for payloads sent from it, rkey for the
  // descriptors a peer uses on it.
  transport::MemoryHandle tx() const noexcept;
  // Keys of the rx arena: lkey only (its rkey grants nothing remote).
  transport::MemoryHandle rx() const noexcept;
  // The tx arena's rkey on rail `rail` (0 when not registered there).
  std::uint32_t tx_rkey(std::uint32_t rail) const noexcept;
  // The tx arena's range as registered (0 when not): what a RailKeys
  // message announces (transport/wire/rail_keys.h).
  std::uint64_t tx_addr() const noexcept;
  std::uint64_t tx_length() const noexcept;
  ibv_mr* tx_mr() const noexcept { return tx_[0]; }  // what memory windows bind to (single rail)

 private:
  using Mrs = std::array<ibv_mr*, transport::kMaxRails>;
  static transport::MemoryHandle handle(const Mrs& mrs) noexcept;
  Mrs tx_{};
  Mrs rx_{};
};

}  // namespace ferry::daemon
