// One attached client as the engine sees it: its segment, rings, doorbells,
// rx-arena allocator, endpoints and completion overflow. Created on the
// control thread at attach, then owned by the engine thread alone; only
// ClientInfo is shared (immutable facts plus engine-written atomics that the
// control thread reads for `ferryctl clients`).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/session/segment_mr.h"
#include "daemon/session/sink.h"
#include "daemon/session/validate.h"
#include "shm/doorbell.h"
#include "shm/ring.h"
#include "shm/segment.h"
#include "shm/slab_allocator.h"

namespace ferry::daemon {

// Per-client caps so a client cannot grow daemon memory without bound.
inline constexpr std::size_t kMaxEndpointsPerClient = 65536;
inline constexpr std::size_t kMaxServicesPerClient = 1024;

struct ClientInfo {
  std::uint32_t id = 0;
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::uint32_t engine = 0;  // the engine it was placed on
  std::string name;
  std::uint64_t tx_bytes = 0;
  std::uint64_t rx_bytes = 0;
  std::chrono::steady_clock::time_point attached_at;
  std::atomic<std::uint32_t> endpoints{0};  // engine writes
  std::atomic<std::uint32_t> services{0};   // engine writes
};

// A Send/Call waiting for room at its receiver (FIFO per endpoint).
struct Parked {
  Operation op;
  Attempt at;  // at.deadline_ns is set: when it gives up
};

// A remote endpoint's state at the sender (remote/remote_sender.h): the
// peer's proxy endpoint, the endpoint window and Busy back-off.
struct RemoteLink {
  std::uint32_t channel = 0;
  std::uint32_t remote_ep = 0;  // the peer's proxy endpoint id
  bool peer_dead = false;       // the channel died: later Send/Call -> PeerReset, Close -> Ok
  std::uint32_t inflight = 0;   // Sends/Calls posted, not answered (endpoint window)
  // Ops are numbered per endpoint; one the peer refused Busy goes again
  // after a backoff that doubles while refusals go on.
  std::uint64_t next_seq = 1;
  std::uint64_t paused_until_ns = 0;
  std::uint64_t backoff_ns = 0;
  // After a refusal nothing goes until every op in flight is answered (those
  // sent before the resend are refused too and must be resent before any
  // later op). resync_seq: a refused op was given up (its deadline passed);
  // the peer still waits for that number, so the next op sent carries it.
  bool resend_wait = false;
  std::uint64_t resync_seq = 0;
  // An op whose keys are being bound has not gone yet: later ops of the
  // endpoint wait behind it, so the endpoint keeps its order.
  bool keys_opening = false;
};

struct Service;

// "No engine": a session that is no shadow, an endpoint not forwarded.
inline constexpr std::uint32_t kNoEngine = ~std::uint32_t{0};

struct Endpoint {
  std::uint32_t id = 0;
  Sink* sink = nullptr;          // bound at Open: local delivery, the remote sender or the forwarder
  std::uint32_t service_id = 0;  // local: target; may have gone away since Open
  RemoteLink remote;             // remote endpoints only (remote.channel != 0)
  // A local endpoint's service and its owner as last looked up, valid while
  // LocalDelivery's generation is `cache_gen` (no service or client has
  // gone since): a Send then costs no hash lookup.
  const Service* cached_service = nullptr;
  ClientSession* cached_owner = nullptr;
  std::uint64_t cache_gen = 0;
  // An endpoint another engine serves (engines/forwarder.h): its ops run
  // there, on this client's shadow, as endpoint `forward_ep` of it.
  std::uint32_t forward_engine = kNoEngine;
  std::uint32_t forward_ep = 0;
  std::deque<Parked> parked;
  bool in_retry_list = false;
  bool is_remote() const noexcept { return remote.channel != 0; }
};

class ClientSession {
 public:
  ClientSession(std::shared_ptr<ClientInfo> info, shm::CreatedSegment segment, shm::Doorbell sq_bell,
                shm::Doorbell cq_bell, std::uint32_t max_message_bytes);
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;

  // Engines (engines/forwarder.h): the shadow of `origin` on another engine,
  // for the ops it runs there (on endpoints whose service or channel that
  // engine owns). It names the same memory and keeps no rings: its
  // completions go back to the client's own engine, `origin_engine`, which
  // alone touches the client's rings. `origin` outlives it (its engine keeps
  // it retired until every shadow is freed).
  static std::unique_ptr<ClientSession> shadow_of(const ClientSession& origin, std::uint32_t origin_engine);
  bool is_shadow() const noexcept { return origin_engine != kNoEngine; }
  const ClientInfo& info() const noexcept { return *info_; }

  std::uint32_t id() const noexcept { return info_->id; }
  ClientInfo& info() noexcept { return *info_; }
  std::byte* at(std::uint64_t offset) const noexcept { return segment_.view.at(offset); }
  const shm::SegmentView& view() const noexcept { return segment_.view; }
  int segment_fd() const noexcept { return segment_.mapping.fd(); }

  shm::Doorbell sq_bell;
  shm::Doorbell cq_bell;
  shm::RingConsumer<shm::SqEntry> sq;
  shm::RingProducer<shm::CqEntry> cq;
  shm::SlabAllocator rx;
  ArenaBounds bounds;

  // Completions that did not fit the CQ; bounded because the engine stops
  // consuming this client's SQ while it is non-empty and keeps `outstanding`
  // (ops consumed but not yet completed) at or below the CQ capacity.
  std::deque<shm::CqEntry> overflow;
  std::uint32_t outstanding = 0;
  bool cq_dirty = false;  // posted since the last doorbell check
  bool doomed = false;    // detach at the end of this engine turn
  // Inline deliveries (ring_entries.h): posted so far, and how many more
  // may go before the client's released count is read again.
  std::uint32_t inline_posted = 0;
  std::uint32_t inline_credits = 0;

  // rdma: the segment's registration (attach), and how many posted WRs name
  // its lkey; a detached session with some stays retired until they complete.
  SegmentMr mr;
  std::uint32_t zc_inflight = 0;
  // Remote ops that let a peer READ or WRITE this segment until answered
  // (RemoteOp::exposed); a detached session also stays retired until 0.
  std::uint32_t remote_holds = 0;

  // A shadow: the engine of the client's own session (kNoEngine: this is it).
  std::uint32_t origin_engine = kNoEngine;
  // The client's own session: engines that hold a shadow of it (bit per
  // engine) and how many of them have not freed theirs yet; it stays
  // retired after detach until none is left.
  std::uint64_t shadow_engines = 0;
  std::uint32_t shadow_refs = 0;

  std::unordered_map<std::uint32_t, Endpoint> endpoints;
  std::vector<std::uint32_t> services;
  // max-endpoints-per-client (at most kMaxEndpointsPerClient): an Open past
  // it fails NoMemory, logged once per client (endpoint_cap_reached).
  std::uint32_t max_endpoints = kMaxEndpointsPerClient;
  bool endpoint_cap_logged = false;
  [[nodiscard]] bool endpoint_cap_reached() noexcept;
  // A new endpoint bound to `sink`, with a fresh nonzero id (ids wrap,
  // skipping live ones). The caller checks endpoint_cap_reached() first.
  Endpoint& add_endpoint(Sink& sink);
  // The last endpoint found is remembered (a client sends on one endpoint
  // in a row more often than not): no hash lookup then.
  Endpoint* find_endpoint(std::uint32_t id) noexcept {
    if (id == last_endpoint_id_ && id != 0) return last_endpoint_;
    return find_endpoint_slow(id);
  }
  void remove_endpoint(std::uint32_t id);

 private:
  Endpoint* find_endpoint_slow(std::uint32_t id) noexcept;
  std::uint32_t last_endpoint_id_ = 0;  // 0: none (endpoint ids are nonzero)
  Endpoint* last_endpoint_ = nullptr;   // map nodes stay put until erased
  std::uint32_t next_endpoint_id_ = 1;
  std::shared_ptr<ClientInfo> info_;
  shm::CreatedSegment segment_;
};

}  // namespace ferry::daemon
