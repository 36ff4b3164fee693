// Peers' traffic to our services. A peer's Open creates a proxy endpoint
// (the peer's endpoint as seen here); its Sends and Calls on it are
// delivered like local traffic (serve/local_delivery.h), the payload copied
// once from the transport's receive buffer into the server's rx arena, or
// READ straight into it (rendezvous.h). Sends are answered at once with a
// zero-length Response carrying the outcome; Calls by the server's Reply
// (remote_reply.h). proxy_server.cpp: opens, closes, deliveries, READs
// done; proxy_staging.cpp: back-pressure.
//
// Back-pressure: when the server's rx arena or CQ is full the delivery is
// staged (copied to the daemon heap: the only datapath allocation, and only
// under back-pressure) up to staging_bytes, behind which the sender gets
// Busy. Staged deliveries keep their per-proxy order and time out after
// delivery_timeout_ms. Each proxy may use only a share of the staging area
// (per-endpoint receive capacity): a stopped consumer back-pressures its own
// senders (their windows at their daemon, then Busy) and never the other
// endpoints on the same channel. After a Busy the proxy refuses every later
// op until the refused one comes again (header seq), so the sender's
// retries keep the endpoint's order. Engine thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/counters.h"
#include "daemon/loop/deadlines.h"
#include "daemon/loop/engine_fault.h"
#include "daemon/remote/peer_fwd.h"
#include "daemon/serve/calls.h"
#include "daemon/serve/local_delivery.h"
#include "daemon/serve/rendezvous.h"
#include "transport/wire/header.h"

namespace ferry::daemon {

struct EngineGroup;

class ProxyServer {
 public:
  // `group`, `engine`: an Open for a service of another of our engines is
  // redirected there (wire::kFlagRedirect; engines/open_router.h).
  ProxyServer(const Config& config, peer::ChannelManager& peers, Sessions& sessions, LocalDelivery& local, Calls& calls,
              Deadlines& deadlines, Counters& counters, EngineFault fault, const EngineGroup& group,
              std::uint32_t engine);

  void on_open(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload);
  void on_close(peer::Channel& ch, const wire::Header& h);
  // Send, Call, RendezvousReq.
  void on_delivery(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload);
  // A rendezvous READ, or a chunk of a split one, finished (tag kind Read;
  // `chunk`: the tag's generation field).
  void on_read_done(std::uint32_t slot, std::uint32_t chunk, Status status);
  // Staged deliveries that may go now; returns how many went or gave up.
  std::size_t retry_staged();
  void channel_down(std::uint32_t channel);
  bool staging() const noexcept { return !staged_.empty(); }
  void fill(peer::PeerInfo& p) const noexcept { reads_.fill(p); }
  std::uint32_t reads_inflight() const noexcept { return reads_.active(); }  // rendezvous READs
  // Rendezvous READs started so far of at least engine-spin-bulk-bytes
  // (spin_policy.h: Transfer::Large).
  std::uint64_t large_started() const noexcept { return large_started_; }

 private:
  struct Proxy {
    std::uint32_t channel = 0;
    std::uint32_t service_id = 0;
    std::uint32_t staged = 0;        // deliveries waiting in staged_ (keeps their order)
    std::uint64_t staged_bytes = 0;  // their payload bytes: a proxy's share of staging is bounded
    // Nonzero: we refused this sequence number Busy and refuse every later
    // one until it comes again.
    std::uint64_t refused_from = 0;
    std::uint32_t reading = 0;  // rendezvous READs in flight for it (eager ones wait behind them)
  };
  // A delivery whose receiver was full, copied out of the receive buffer.
  struct Staged {
    std::uint32_t channel = 0;
    std::uint32_t lane = 0;
    wire::Header header{};
    std::vector<std::byte> payload;
    std::uint64_t deadline_ns = 0;       // given up then (Timeout): the delivery timeout, or a Call's own if earlier
    std::uint64_t call_deadline_ns = 0;  // a Call's timeout (0: none)
  };

  Proxy* proxy_of(std::uint32_t channel, std::uint32_t id) noexcept;
  Outcome deliver(std::uint32_t channel, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
                  std::uint64_t call_deadline_ns);
  Outcome start_read(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
                     std::uint64_t call_deadline_ns);
  // A zero-length Response to the peer's op `to`: a Send's outcome, a refusal.
  void answer(std::uint32_t channel, std::uint32_t lane, const wire::Header& to, Status status) noexcept;
  void stage(std::uint32_t channel, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
             std::uint64_t call_deadline_ns);
  void unstage(const Staged& sd) noexcept;

  peer::ChannelManager& peers_;
  const EngineGroup& group_;
  std::uint32_t engine_;
  Sessions& sessions_;
  LocalDelivery& local_;
  Calls& calls_;
  Deadlines& deadlines_;
  Counters& counters_;
  std::uint64_t staging_limit_;
  std::uint32_t max_message_bytes_;
  std::uint32_t large_bytes_;  // engine-spin-bulk-bytes (0: none counts)
  std::uint64_t large_started_ = 0;
  EngineFault fault_;  // FERRY_FAULT_ENGINE (tests only): off by default
  Rendezvous reads_;
  std::unordered_map<std::uint32_t, Proxy> proxies_;
  std::uint32_t next_proxy_id_ = 1;
  std::deque<Staged> staged_;
  std::uint64_t staged_bytes_ = 0;
  std::vector<std::uint32_t> blocked_;  // scratch for retry_staged: proxies that wait this pass
};

}  // namespace ferry::daemon
