// The receiving side of large messages over rdma (rendezvous): a
// RendezvousReq names the sender's buffer; the proxy server reserves a
// block in its server's rx arena and this posts the RDMA READ of the
// payload straight into it (no copy through daemon memory); on completion
// the proxy server delivers it like an eager message.
//
// Bounds: at most max-reads-inflight READs per channel (the NIC's
// outstanding READ limit is per QP and small; more would only queue in the
// NIC) and one job slot each; past them the request waits in staging (a
// descriptor, never the payload). The READ's local SGE names the server's
// MR, so the WR is tracked like a zero-copy send (zero_copy.h: a detached
// server stays retired until it completes); the sender's buffer is held by
// its daemon until our Response. Engine thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "daemon/remote/peer_fwd.h"
#include "daemon/session/outcome.h"
#include "daemon/session/sessions.h"
#include "transport/wire/header.h"
#include "transport/wire/remote_buffer.h"

namespace ferry::daemon {

class Rendezvous {
 public:
  struct Job {
    std::uint32_t channel = 0;
    std::uint32_t lane = 0;
    wire::Header header{};      // the RendezvousReq
    wire::RemoteBuffer resp{};  // a Call's response buffer (rkey 0: none)
    std::uint32_t server = 0;   // client id
    std::uint32_t service = 0;  // service id
    shm::Block block{};
    std::uint32_t length = 0;
    std::uint64_t call_deadline_ns = 0;  // a Call's timeout (0: none)
  };

  Rendezvous(peer::ChannelManager& peers, Sessions& sessions, std::uint32_t max_reads_per_channel);

  // Whether a READ may start on `channel` now (a job slot, the channel's limit).
  bool can_start(std::uint32_t channel) const noexcept;
  // Posts the READ of `src` into job.block of `server` (job: everything but
  // the slot). Blocked: the lane or every tracking slot is full; Failed:
  // the channel is gone. Either way the caller still owns the block.
  Outcome start(peer::Channel& ch, ClientSession& server, const wire::RemoteBuffer& src, const Job& job);
  // A READ's completion (tag kind Read): its job, taken out.
  [[nodiscard]] std::optional<Job> finish(std::uint32_t slot) noexcept;
  void fill(peer::PeerInfo& p) const noexcept;
  std::uint32_t active() const noexcept { return static_cast<std::uint32_t>(jobs_.size() - free_.size()); }

 private:
  static constexpr std::uint32_t kJobs = 1024;  // READs in flight over all channels
  peer::ChannelManager& peers_;
  Sessions& sessions_;
  std::uint32_t max_per_channel_;
  std::vector<Job> jobs_;
  std::vector<bool> live_;
  std::vector<std::uint32_t> free_;
  std::unordered_map<std::uint32_t, std::uint32_t> per_channel_;  // READs in flight
};

}  // namespace ferry::daemon
