// The RDMA backend: RC QPs set up through rdma_cm, one CQ shared by every
// QP, preregistered receive slots, batched posting and polling.
//
// RdmaTransport is the datapath facade and owns the verbs resources; each
// other concern is a class of its own, owned here:
//   ConnectionTable (rdma_connections.*): slots, ConnIds, teardown;
//   RdmaConnector (rdma_connector.h: rdma_cm_events.cpp, rdma_connect.cpp,
//     rdma_connect_async.cpp): listen, connect, connect_async, cm events;
//   QpFactory (rdma_qp.*): QP creation and INIT/RTR/RTS;
//   DeviceEvents (rdma_device_events.*): async events, port state;
//   RdmaFault (rdma_fault.*): the test-only fault switch.
// Files of the class itself: rdma_transport.cpp (create, close, memory) and
// rdma_transport_datapath.cpp (post_send/poll); also device.cpp, gid.cpp,
// memory.cpp.
//
// Receives: one shared receive queue (SRQ) per transport (= per device),
// config.pool_receives() slots of the receive slab, all posted at init and
// every consumed one reposted at the start of the next poll() (one
// ibv_post_srq_recv per poll). Every QP takes its receives from it, so
// receive memory is set by the pool, not by connections. A receive CQE
// names its slot in wr_id and its connection by wc.qp_num (QpIndex). No
// SEND may meet an empty SRQ (rnr_retry is 0): the owner's credits keep the
// messages all peers have in flight within the pool (daemon/peer/
// receive_pool.h grants them).
//
// Wire use: Send = one SEND of header (48 bytes, from the connection's head
// slot, with the prefix) + payload (second SGE: the caller's registered
// memory, or copied into a bounce slot of the shared bounce slab when
// local.lkey == 0), inline when small. Send memory per connection is its
// 128 head slots (16 KiB); payload copies share config.bounce_slots. RdmaWriteImm
// carries the low 32 bits of header.token as immediate data; the peer gets a
// Recv completion whose header is reconstructed as {type WriteDone,
// token = imm, aux = bytes written, payload_len 0}: the consumer maps the
// token back to its pending call.
//
// connect() blocks (bounded by connect_timeout_ms) and needs the listening
// transport to be polled meanwhile: in one process that means another thread.
// connect_async() does the same steps driven by rdma_cm events in poll(), so
// the owner never waits (the daemon's lanes use it).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "transport/owner_thread.h"
#include "transport/rdma/gid.h"
#include "transport/rdma/memory.h"
#include "transport/rdma/rdma_config.h"
#include "transport/rdma/rdma_connection.h"
#include "transport/rdma/rdma_connections.h"
#include "transport/rdma/rdma_connector.h"
#include "transport/rdma/rdma_device_events.h"
#include "transport/rdma/rdma_fault.h"
#include "transport/rdma/rdma_qp.h"
#include "transport/transport.h"

namespace ferry::transport::rdma {

// Datapath counters (compiled in with the datapath_stats option).
struct RdmaStats {
  std::uint64_t post_send_calls = 0;  // ibv_post_send doorbells
  std::uint64_t wrs_posted = 0;
  std::uint64_t wrs_signaled = 0;
  std::uint64_t wrs_inline = 0;
  std::uint64_t bounce_copies = 0;
  std::uint64_t recvs = 0;
  std::uint64_t cq_polls = 0;
  std::uint64_t cq_polls_empty = 0;         // polls that found no completion
  std::uint64_t rnr_retry_exceeded = 0;     // IBV_WC_RNR_RETRY_EXC_ERR: ferry overran a peer's receives
  std::uint64_t retry_exceeded = 0;         // IBV_WC_RETRY_EXC_ERR: transport retries ran out
  std::uint64_t wc_errors = 0;              // any other failed completion (flushes excluded)
  std::uint64_t protocol_errors = 0;        // a received header failed validation
  std::uint64_t async_events = 0;           // device/port/QP events (DeviceEvents)
  std::uint64_t recv_repost_failures = 0;   // receives the SRQ refused back (a broken device)
  std::uint64_t recv_registered_bytes = 0;  // the receive slab (the shared queue's slots), set at init
  std::uint64_t send_registered_bytes = 0;  // the send slab, set at init
};

class RdmaTransport final : public Transport {
 public:
  // Picks the device, allocates PD, CQ, channels and both slabs.
  // BadRequest for an invalid config, NotSupported when no device is usable,
  // NoMemory when registration fails.
  static Result<std::unique_ptr<RdmaTransport>> create(const RdmaConfig& config);
  ~RdmaTransport() override;

  TransportCaps caps() const noexcept override;
  int event_fd() const noexcept override { return epoll_fd_; }

  [[nodiscard]] Result<std::uint16_t> listen(std::string_view host, std::uint16_t port) override;
  [[nodiscard]] Result<ConnId> connect(std::string_view host, std::uint16_t port) override;
  [[nodiscard]] Result<ConnId> connect_async(std::string_view host, std::uint16_t port) override;
  [[nodiscard]] Status close(ConnId conn) override;
  // The IPv4 address at the far end of an open (or accepting, connecting)
  // connection, from its rdma_cm id; "" otherwise.
  std::string peer_address(ConnId conn) const override;
  [[nodiscard]] Result<MemoryHandle> register_memory(void* addr, std::size_t len) override;
  [[nodiscard]] Status deregister_memory(MemoryHandle mr) override;

  [[nodiscard]] PostResult post_send(std::span<const SendWr> wrs) noexcept override;
  std::size_t poll(std::span<Completion> out) noexcept override;
  bool prepare_to_sleep() noexcept override;

  const RdmaConfig& config() const noexcept { return config_; }
  const RdmaStats& stats() const noexcept { return stats_; }
  const GidChoice& gid() const noexcept { return gid_; }
  const char* device_name() const noexcept;
  // rxe or siw: the "NIC" is kernel code on the host's own CPUs (its
  // completions are softirq work), so a sleep and wake-up cost more than a
  // spin that yields (the daemon's engine-spin-hold auto).
  bool software_provider() const noexcept;
  std::uint32_t max_inline() const noexcept { return qps_.max_inline(); }
  // The protection domain, for memory registered by objects the owner
  // thread does not own (ibv_reg_mr is thread-safe): the daemon registers
  // each client segment at attach on its control thread.
  ibv_pd* pd() const noexcept { return pd_; }
  // The QP of an open connection (nullptr otherwise), for tests/diagnostics.
  ibv_qp* conn_qp(ConnId conn) noexcept { return conns_.qp_of(conn); }
  void release_owner() noexcept override { owner_.release(); }
  std::uint64_t rnr_naks() const noexcept override { return stats_.rnr_retry_exceeded; }
  // Accepted connection requests leave the admission limits (transport/accept_guard.h).
  void vouch(ConnId conn) noexcept override;
  AcceptCounts accept_counts() const noexcept override;

 private:
  explicit RdmaTransport(const RdmaConfig& config);
  [[nodiscard]] Status init();

  // datapath (rdma_transport_datapath.cpp)
  void repost_consumed() noexcept;
  bool rearm_cq() noexcept;
  std::size_t report_all(std::span<Completion> out) noexcept;
  std::size_t poll_cq(std::span<Completion> out) noexcept;
  std::size_t report(std::uint32_t slot, std::span<Completion> out) noexcept;
  bool fill_wr(RdmaConnection& c, std::uint32_t slot, const SendWr& in, ibv_send_wr& wr, ibv_sge* sge,
               Status& why) noexcept;
  std::byte* recv_slot(std::uint32_t i) const noexcept {
    return recv_slab_.data() + std::size_t{i} * config_.slot_bytes();
  }
  [[nodiscard]] Status post_pool() noexcept;
  std::byte* send_slot(std::uint32_t slot, std::uint32_t i) const noexcept {
    return send_slab_.data() + (std::size_t{slot} * kSendQueueDepth + (i & (kSendQueueDepth - 1))) * kHeadSlotBytes;
  }
  std::byte* bounce_slot(std::uint32_t b) const noexcept {
    return bounce_slab_.data() + std::size_t{b} * config_.slot_bytes();
  }
  // A free bounce slot, or kNoBounce; and back.
  std::uint32_t take_bounce() noexcept { return bounce_top_ == 0 ? kNoBounce : bounce_free_[--bounce_top_]; }
  void put_bounce(std::uint32_t& b) noexcept {
    if (b == kNoBounce) return;
    bounce_free_[bounce_top_++] = b;
    b = kNoBounce;
  }

  RdmaConfig config_;
  ibv_context* ctx_ = nullptr;  // owned by librdmacm
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* comp_channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_srq* srq_ = nullptr;
  rdma_event_channel* cm_channel_ = nullptr;
  int epoll_fd_ = -1;
  bool cq_armed_ = false;
  // The slow sources (rdma_cm events, async device events, parked ids) are
  // looked at every kSlowPollEvery-th poll, on the first poll after a sleep
  // and on every poll while a connect is under way: each look is a few
  // syscalls, which a spinning engine would otherwise pay every turn.
  // (Accepted needs no cm event: the connection's first CQE reports it.)
  static constexpr std::uint32_t kSlowPollEvery = 64;
  std::uint32_t polls_ = 0;
  bool slow_due_ = true;
  GidChoice gid_;

  RegisteredSlab recv_slab_;
  RegisteredSlab send_slab_;                      // per connection: kSendQueueDepth head slots (header + prefix)
  RegisteredSlab bounce_slab_;                    // shared: bounce_slots payload slots
  std::unique_ptr<std::uint32_t[]> bounce_free_;  // stack of free bounce slots
  std::uint32_t bounce_top_ = 0;
  // Declared in dependency order: each refers only to those above it.
  DeviceEvents events_;
  ConnectionTable conns_;
  QpFactory qps_;
  RdmaConnector connector_;
  std::uint32_t next_slot_ = 0;  // where the next report sweep starts (fairness)

  // Preallocated: the datapath allocates nothing.
  std::array<ibv_send_wr, kPostBatch> wr_{};
  std::array<ibv_sge, 2 * kPostBatch> sge_{};
  std::array<ibv_wc, kPollBatch> wc_{};
  // Receive slots (pool indices) handed out by the last poll(), reposted to
  // the SRQ at the next one.
  static constexpr std::size_t kRepostCapacity = kPollBatch;
  std::array<std::uint32_t, kRepostCapacity> repost_{};
  std::size_t repost_count_ = 0;
  std::array<ibv_recv_wr, kRepostCapacity> recv_wr_{};
  std::array<ibv_sge, kRepostCapacity> recv_sge_{};

  std::vector<std::pair<std::uint64_t, ibv_mr*>> mrs_;  // control path only
  std::uint64_t next_mr_id_ = 1;
  RdmaStats stats_;
  RdmaFault fault_;  // off unless FERRY_FAULT_RDMA is set (tests only)
  OwnerThread owner_;
};

}  // namespace ferry::transport::rdma
