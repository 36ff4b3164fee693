// A client segment's memory registration on the rdma data transport: made
// once at attach (control thread; ibv_reg_mr is thread-safe and touches no
// state of the transport's owner thread), released when the session is
// destroyed. Eager remote Sends/Calls/Replies then post the payload SGE
// straight from the client's tx arena with this lkey: no bounce copy.
//
// The session must outlive every WR that names this lkey: the engine counts
// them (ClientSession::zc_inflight) and keeps a detached session retired
// until they have completed (engine.h, zc_*).
#pragma once

#include <cstddef>
#include <string>

#include "ferry/status.h"
#include "transport/transport.h"

struct ibv_mr;
struct ibv_pd;

namespace ferry::daemon {

class SegmentMr {
 public:
  SegmentMr() = default;
  ~SegmentMr();
  SegmentMr(SegmentMr&& o) noexcept : mr_(o.mr_) { o.mr_ = nullptr; }
  SegmentMr& operator=(SegmentMr&& o) noexcept;
  SegmentMr(const SegmentMr&) = delete;
  SegmentMr& operator=(const SegmentMr&) = delete;

  // Registers [addr, addr+len) for local write and remote read/write on `pd`.
  // NoMemory (with *why) when the device refuses (pinned-memory limit, MR
  // count); NotSupported without rdma support.
  static Status make(ibv_pd* pd, void* addr, std::size_t len, SegmentMr* out, std::string* why);

  bool valid() const noexcept { return mr_ != nullptr; }
  transport::MemoryHandle handle() const noexcept;

 private:
  ibv_mr* mr_ = nullptr;
};

}  // namespace ferry::daemon
