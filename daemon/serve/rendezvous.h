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
//
// Several rails (docs/rails.md): a READ of at least rail-split-bytes is
// split into one chunk per rail that has a live lane of the channel (the
// request's lane first), each chunk an RDMA READ of its own range landing
// at its own offset of the block, so nothing is reassembled. It needs the
// peer's rail keys for the source (peer_keys.h): each chunk's WR carries
// them, and its lane takes the one of the peer rail it reaches. Chunk sizes
// follow each rail's READ throughput (an EWMA of bytes over post-to-
// completion time of every READ on it; equal shares until each chosen rail
// is measured). The job completes once, when its last chunk does, with the
// first failure among them (a chunk fails only as a whole READ does: its
// lane's rebuilds replay it, and only a channel that ends fails it).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "daemon/counters.h"
#include "daemon/remote/peer_fwd.h"
#include "daemon/session/outcome.h"
#include "daemon/session/sessions.h"
#include "transport/transport.h"
#include "transport/wire/header.h"
#include "transport/wire/remote_buffer.h"

namespace ferry::daemon {

class Rendezvous {
 public:
  static constexpr std::uint32_t kMaxChunks = transport::kMaxRails;
  // Chunks start on this boundary (the last one takes the rest).
  static constexpr std::uint32_t kChunkAlign = 4096;

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
    Status status = Status::Ok;          // finish(): the first failure of its chunks
  };

  Rendezvous(peer::ChannelManager& peers, Sessions& sessions, Counters& counters, std::uint32_t max_reads_per_channel,
             std::uint32_t split_bytes);

  // Whether a READ may start on `channel` now (a job slot, the channel's limit).
  bool can_start(std::uint32_t channel) const noexcept;
  // Posts the READ of `src` into job.block of `server` (job: everything but
  // the slot), split over rails when it is large enough. Blocked: the lane
  // or every tracking slot is full; Failed: the channel is gone. Either way
  // the caller still owns the block and nothing was posted.
  Outcome start(peer::Channel& ch, ClientSession& server, const wire::RemoteBuffer& src, const Job& job,
                std::uint64_t now_ns);
  // A READ's completion (tag kind Read; `chunk` its chunk, 0 unsplit): its
  // job, taken out, once every chunk of it has completed; nullopt before.
  [[nodiscard]] std::optional<Job> finish(std::uint32_t slot, std::uint32_t chunk, Status status,
                                          std::uint64_t now_ns) noexcept;
  void fill(peer::PeerInfo& p) const noexcept;
  std::uint32_t active() const noexcept { return static_cast<std::uint32_t>(jobs_.size() - free_.size()); }

 private:
  struct Chunk {
    std::uint32_t rail = 0;  // local rail of the lane it went on
    std::uint32_t bytes = 0;
    std::uint64_t posted_ns = 0;
    bool done = false;
  };
  struct Parts {
    std::uint32_t count = 0;  // chunks posted
    std::uint32_t left = 0;   // ... not completed yet
    std::array<Chunk, kMaxChunks> chunk{};
  };
  struct Plan {
    std::uint32_t count = 0;
    std::array<std::uint32_t, kMaxChunks> lane{};
    std::array<std::uint32_t, kMaxChunks> rail{};
    std::array<std::uint32_t, kMaxChunks> offset{};
    std::array<std::uint32_t, kMaxChunks> bytes{};
    std::array<std::uint32_t, transport::kMaxRails> rkeys{};  // the peer's key per rail (0: none)
  };
  static constexpr std::uint32_t kJobs = 1024;  // READs in flight over all channels
  // The lanes and ranges of a READ of `src`: one chunk (the request's lane,
  // the whole range) unless it is split.
  Plan plan(peer::Channel& ch, const wire::RemoteBuffer& src, std::uint32_t request_lane) noexcept;
  void measured(std::uint32_t rail, std::uint32_t bytes, std::uint64_t elapsed_ns) noexcept;

  peer::ChannelManager& peers_;
  Sessions& sessions_;
  Counters& counters_;
  std::uint32_t max_per_channel_;
  std::uint32_t split_bytes_;
  std::vector<Job> jobs_;
  std::vector<Parts> parts_;
  std::vector<bool> live_;
  std::vector<std::uint32_t> free_;
  std::unordered_map<std::uint32_t, std::uint32_t> per_channel_;  // READs in flight
  std::array<double, transport::kMaxRails> rate_{};               // bytes per ns of READs per rail (0: unmeasured)
};

}  // namespace ferry::daemon
