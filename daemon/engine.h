// The datapath engine: one thread that owns every datapath object (client
// sessions, endpoints, services, pending calls) and runs the loop in
// engine_loop.cpp. The control thread talks to it only through two SPSC
// queues: commands in (attach/detach/stop, plus an eventfd to wake the
// engine) and events out (clients the engine threw out, plus an eventfd the
// control thread watches).
//
// Files by concern: engine.cpp (setup, attach/detach), engine_loop.cpp (the
// loop and sleeping), completions.cpp, services_ops.cpp (Serve/Unserve),
// endpoints.cpp (Open/Close), delivery.cpp (Send/Call and parking),
// calls.cpp (Reply and call bookkeeping); channels to peer daemons:
// peer/ (channel state, handshake, heartbeats), remote_endpoints.cpp (our
// clients' remote Open/Send/Call/Close), remote_serving.cpp (peers' traffic
// to our services, staging), remote_events.cpp (channel up/down, SendDone).
#pragma once

struct ibv_pd;

#include <atomic>
#include <boost/lockfree/spsc_queue.hpp>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "daemon/calls.h"
#include "daemon/client_session.h"
#include "daemon/config.h"
#include "daemon/counters.h"
#include "daemon/engine_fault.h"
#include "daemon/mono_clock.h"
#include "daemon/peer/channel_manager.h"
#include "daemon/peer/remote_ops.h"
#include "daemon/remote_keys.h"
#include "daemon/services.h"
#include "daemon/target.h"
#include "daemon/wr_tag.h"
#include "ferry_config.h"

namespace ferry::daemon {

struct EngineCommand {
  enum class Kind : std::uint8_t { Attach, Detach, Stop };
  Kind kind = Kind::Stop;
  ClientSession* session = nullptr;  // Attach: ownership passes to the engine
  std::uint32_t client_id = 0;       // Detach
};

// Engine sizing: queue depths and batch sizes are constants, checked here.
inline constexpr std::size_t kCommandQueueDepth = 16384;
inline constexpr std::size_t kEventQueueDepth = 4096;
inline constexpr std::uint32_t kSqBatch = 32;
static_assert(kSqBatch <= shm::kMinRingEntries, "a batch never exceeds the smallest ring");
inline constexpr int kBusyPollMs = 1;
inline constexpr int kPeerTickMs = 10;  // sleep bound while channels exist (heartbeats, deadlines)
// Per-client caps so a client cannot grow daemon memory without bound.
inline constexpr std::size_t kMaxEndpointsPerClient = 65536;
inline constexpr std::size_t kMaxServicesPerClient =
    1024;  // sleep granularity while deliveries are parked or CQs overflow

// A peer's endpoint on one of our services (the far end of its Open).
struct ProxyEndpoint {
  std::uint32_t channel = 0;
  std::uint32_t service_id = 0;
  std::uint32_t lane = 0;
  std::uint32_t staged = 0;        // deliveries waiting in staged_ (keeps their order)
  std::uint64_t staged_bytes = 0;  // their payload bytes: a proxy's share of staging is bounded
  // Nonzero: we refused this sequence number Busy and refuse every later one
  // until it comes again, so the sender's retries keep the endpoint's order.
  std::uint64_t refused_from = 0;
  std::uint32_t reading = 0;  // rendezvous READs in flight for it (eager ones wait behind them)
};

// A rendezvous READ in flight (rendezvous.cpp): the peer's source buffer is
// being read into a block of the server's rx arena; on completion it is
// delivered like an eager message.
struct ReadJob {
  std::uint32_t channel = 0;
  std::uint32_t lane = 0;
  wire::Header header{};      // the RendezvousReq
  wire::RemoteBuffer resp{};  // a Call's response buffer (rkey 0: none)
  std::uint32_t server = 0;   // client id
  std::uint32_t service = 0;  // service id
  shm::Block block{};
  std::uint32_t length = 0;
  bool live = false;
  std::uint64_t call_deadline_ns = 0;  // a Call's timeout (0: none)
};

// A remote Send/Call whose receiver was full: copied out of the transport's
// receive buffer (the one place the datapath allocates: back-pressure).
struct StagedDelivery {
  std::uint32_t channel = 0;
  std::uint32_t lane = 0;
  wire::Header header{};
  std::vector<std::byte> payload;
  std::uint64_t deadline_ns = 0;       // given up then (Timeout): the delivery timeout, or a Call's own if earlier
  std::uint64_t call_deadline_ns = 0;  // a Call's timeout (0: none)
};

// `source` of a delivery that came from a peer: this bit | the proxy id.
inline constexpr std::uint32_t kRemoteSourceBit = 1u << 31;

class Engine final : private peer::ChannelEvents {
 public:
  // `epoch` identifies this daemon instance to peers (nonzero).
  Engine(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch = 1);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Control thread. false when the queue is full (the caller retries).
  bool submit(const EngineCommand& cmd) noexcept;
  // Control thread: next client the engine detached on its own (corrupt
  // ring); readable event_fd() means some may be waiting.
  std::optional<std::uint32_t> pop_event() noexcept;
  int event_fd() const noexcept { return event_fd_; }
  // Control thread: a copy of the channel table taken by the engine on its
  // next turn after this call (asked through the wake fd; waits at most
  // kSnapshotWaitMs, then returns the last one published: the engine also
  // refreshes it a few times a second and on every state change).
  std::vector<peer::PeerInfo> peers_snapshot() const;
  // What carries the data lanes of channels: "rdma" or "tcp" (status JSON).
  const std::string& transport_name() const noexcept { return transport_name_; }
  // Any thread: the rdma data transport's PD (client segments are
  // registered on it at attach), nullptr when the lanes are not rdma. Set
  // before the engine thread starts, never changed.
  ibv_pd* rdma_pd() const noexcept { return rdma_pd_; }
  // Any thread, fixed before the engine thread starts: peers get a key per
  // call (memory windows) rather than the tx arena's (remote_keys.h).
  bool per_call_keys() const noexcept { return keys_.per_call(); }
  // Bootstrap port actually bound (0: not listening).
  std::uint16_t listen_port() const noexcept { return listen_port_; }

  // Engine thread body; returns after a Stop command, all clients detached.
  void run();

 private:
  // engine_loop.cpp
  std::size_t drain_commands();
  std::size_t poll_submissions(ClientSession& c);
  void dispatch(ClientSession& c, const shm::SqEntry& e);
  void reap_doomed();
  void sleep_until_work();
  void assert_owner() const noexcept;

  // engine.cpp
  void adopt(ClientSession* session);
  void detach(std::uint32_t client_id);
  ClientSession* client(std::uint32_t id) noexcept;
  void flush_events() noexcept;

  // completions.cpp
  void post(ClientSession& c, const shm::CqEntry& entry) noexcept;
  void complete(ClientSession& c, shm::Op op, std::uint64_t user_data, Status status, std::uint32_t handle = 0,
                std::uint32_t length = 0) noexcept;
  bool can_deliver(ClientSession& c) noexcept;
  void flush_completions() noexcept;

  // services_ops.cpp / endpoints.cpp
  void op_serve(ClientSession& c, const shm::SqEntry& e);
  void op_unserve(ClientSession& c, const shm::SqEntry& e);
  void op_open(ClientSession& c, const shm::SqEntry& e);
  void op_close(ClientSession& c, const shm::SqEntry& e);

  // delivery.cpp
  enum class Delivery : std::uint8_t { Done, Blocked, Failed };
  void op_send_or_call(ClientSession& c, const shm::SqEntry& e);
  // seq/deadline: a remote op that was already sent once (refused Busy).
  // call_deadline_ns: a local Call's timeout (call_deadlines.cpp), 0: none.
  Delivery try_deliver(ClientSession& c, Endpoint& ep, const shm::SqEntry& e, Status* failure, std::uint64_t seq = 0,
                       std::uint64_t deadline_ns = 0, std::uint64_t call_deadline_ns = 0);
  // The delivery itself, shared by local senders and peers: rx block, copy,
  // Message/Request. `call` is the call record for a Request.
  Delivery deliver(const Service& s, bool is_call, const std::byte* payload, std::uint32_t length, std::uint32_t source,
                   PendingCall call, Status* failure);
  // Its two halves, apart for rendezvous (the block is filled by an RDMA
  // READ in between): an rx block at the service's owner, then the
  // Message/Request naming it.
  Delivery reserve_rx(const Service& s, std::uint32_t length, ClientSession** server, shm::Block* block,
                      Status* failure);
  void publish(ClientSession& server, const Service& s, bool is_call, shm::Block block, std::uint32_t length,
               std::uint32_t source, PendingCall call);
  void park(ClientSession& c, Endpoint& ep, const shm::SqEntry& e, std::uint64_t call_deadline_ns = 0);
  std::size_t retry_parked();

  // calls.cpp
  void op_reply(ClientSession& c, const shm::SqEntry& e);
  void op_release(ClientSession& c, const shm::SqEntry& e);
  void fail_calls_of(ClientSession& gone);
  // Returns true when the lane to the caller had no room: the Reply
  // completes Busy and the call stays open for another Reply (or its timeout).
  bool reply_remote(ClientSession& c, const shm::SqEntry& e, const PendingCall& call);

  // call_deadlines.cpp: a call's timeout (the serving side enforces it; the
  // calling side keeps a backstop for a peer that never answers).
  std::uint32_t call_timeout_of(const shm::SqEntry& e) const noexcept;
  // now + timeout (0: none), noted as a deadline to look at.
  std::uint64_t deadline_after(std::uint32_t timeout_ms) noexcept;
  // How long a delivery may wait for room at its receiver: the delivery
  // timeout, or a Call's own deadline if that is earlier (parked, staged).
  std::uint64_t waiting_deadline(std::uint64_t call_deadline_ns) const noexcept;
  void note_deadline(std::uint64_t at_ns) noexcept;  // 0: none
  std::uint64_t answer_backstop(std::uint32_t timeout_ms, std::uint64_t now_ns) noexcept;
  int ms_until_deadline(std::uint64_t now_ns) const noexcept;  // -1: none
  std::size_t expire_calls();
  // The clock of this turn, read once at the top of each turn (run()): the
  // turn's deadlines and timestamps take it instead of reading the clock
  // again (a syscall where the clocksource has no vDSO path, as in the test
  // VM: six reads a turn were ~15 us there). Stale by at most one turn.
  // Before run() (set-up) it reads the clock.
  std::uint64_t now_ns() const noexcept { return turn_ns_ != 0 ? turn_ns_ : mono_ns(); }
  std::uint64_t turn_ns_ = 0;
  std::uint64_t next_deadline_ns_ = ~std::uint64_t{0};
  std::uint64_t last_deadline_sweep_ns_ = 0;
  std::vector<std::uint32_t> overdue_channels_;  // scratch for expire_calls

  // remote_endpoints.cpp
  static constexpr std::uint64_t kTransportTag = ~0ull;  // epoll tag of the transport's fd
  void setup_peers(std::uint64_t epoch);
  void listen_peers();
  void release_lanes_owner() noexcept;
  std::size_t poll_peers();
  void publish_peers(std::uint64_t now_ns, bool force);
  void op_open_remote(ClientSession& c, const shm::SqEntry& e, const Target& t);
  void send_open(std::uint64_t token, peer::RemoteOp& op, peer::Channel& ch);
  void on_open_ack(peer::Channel& ch, const wire::Header& h);

  // remote_send.cpp: Send/Call to a peer (eager, eager + response buffer,
  // rendezvous), the send windows, answers, close and detach.
  void op_send_or_call_remote(ClientSession& c, Endpoint& ep, const shm::SqEntry& e);
  Delivery try_send_remote(ClientSession& c, Endpoint& ep, const shm::SqEntry& e, Status* failure, std::uint64_t seq,
                           std::uint64_t deadline_ns);
  void repark_refused(ClientSession& c, Endpoint& ep, const peer::RemoteOp& op, std::uint64_t now_ns);
  bool window_open(const peer::Channel& ch, const Endpoint& ep, std::uint32_t bytes) const noexcept;
  void count_stall(peer::Channel& ch, Endpoint& ep) noexcept;  // once per op, however often it is retried
  // Ends a Send/Call's hold on the windows and on its client's memory; every
  // path that erases one from remote_ops_ calls it once.
  void finish_remote_op(const peer::RemoteOp& op) noexcept;
  void release_hold(std::uint32_t client) noexcept;
  void close_remote(ClientSession& c, Endpoint& ep);
  void forget_remote_of(ClientSession& gone);
  void on_response(peer::Channel& ch, const wire::Header& h, const std::byte* payload);
  void on_write_done(peer::Channel& ch, const wire::Header& h);
  std::uint64_t nic_window_bytes_ = 0;  // request bytes in flight over every channel
  std::uint32_t nic_window_ops_ = 0;

  // rendezvous.cpp: the receiving side of large messages.
  void setup_rendezvous();
  Delivery start_read(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
                      Status* failure, std::uint64_t call_deadline_ns);
  void on_read_done(std::uint32_t slot, Status status);
  std::vector<ReadJob> reads_;
  std::vector<std::uint32_t> reads_free_;

  // remote_serving.cpp
  void on_remote_open(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload);
  void on_remote_close(const wire::Header& h);
  void on_remote_delivery(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload);
  // call_deadline_ns: a Call's timeout, from its arrival (call_deadlines.cpp), 0: none.
  Delivery deliver_remote(std::uint32_t channel, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
                          Status* failure, std::uint64_t call_deadline_ns);
  void answer_calls_of_proxy(std::uint32_t channel, std::uint32_t proxy);
  void stage(std::uint32_t channel, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
             std::uint64_t call_deadline_ns);
  std::size_t retry_staged();
  // A zero-length Response (a Send's outcome, a refusal, a call's timeout):
  // sent now, or held when the lane's ring is full and sent by
  // flush_answers() as room frees (dropped if the channel ends first: the
  // caller's daemon then fails the op itself).
  void answer(peer::Channel& ch, std::uint32_t lane, const wire::Header& to, Status status);
  void answer(std::uint32_t channel, std::uint32_t lane, const wire::Header& to, Status status);
  std::size_t flush_answers();
  struct HeldAnswer {
    std::uint32_t channel = 0;
    std::uint32_t lane = 0;
    wire::Header header;
  };
  std::deque<HeldAnswer> held_answers_;  // only under back-pressure
  EngineFault fault_;                    // FERRY_FAULT_ENGINE (tests only): off by default

  // remote_events.cpp (peer::ChannelEvents)
  void on_channel_up(peer::Channel& ch) override;
  void on_channel_down(peer::Channel& ch, Status why) override;
  void on_message(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload) override;
  void on_send_done(std::uint64_t user_data, Status status) override;

  const Config& config_;
  Counters& counters_;
  std::optional<HostPort> own_listen_;
  std::uint64_t delivery_timeout_ns_;

  boost::lockfree::spsc_queue<EngineCommand, boost::lockfree::capacity<kCommandQueueDepth>> commands_;
  boost::lockfree::spsc_queue<std::uint32_t, boost::lockfree::capacity<kEventQueueDepth>> events_;
  std::vector<std::uint32_t> unsent_events_;  // engine-private spill when events_ is full
  int wake_fd_ = -1;                          // control -> engine
  int event_fd_ = -1;                         // engine -> control
  int epoll_fd_ = -1;

  std::unordered_map<std::uint32_t, std::unique_ptr<ClientSession>> clients_;
  std::vector<ClientSession*> order_;  // iteration order for polling
  ServiceRegistry services_;
  CallTable calls_;
  struct EndpointRef {
    std::uint32_t client;
    std::uint32_t endpoint;
  };
  std::vector<EndpointRef> parked_endpoints_;
  std::thread::id owner_;
  bool stop_ = false;

  // Channels to peer daemons (transport first: the manager refers to it).
  std::unique_ptr<transport::Transport> transport_;        // bootstrap connections (tcp)
  std::unique_ptr<transport::Transport> lanes_transport_;  // rdma data lanes; null: lanes on transport_
  std::string transport_name_ = "tcp";                     // what carries the lanes: "rdma" or "tcp"
  std::uint32_t lane_max_message_ = 0;                     // largest Send/Call/Response payload over a lane
  ibv_pd* rdma_pd_ = nullptr;
  RemoteKeys keys_;  // closed before the sessions' MRs go (~Engine)
  // WRs posted with a client's lkey (zero-copy eager sends), so a detached
  // client's segment and MR outlive them: their tag (wr_tag.h) names a
  // slot holding the client and the op's own tag (zero_copy.cpp).
  struct ZcWr {
    std::uint32_t client = 0;
    std::uint64_t user_data = 0;
  };
  std::vector<ZcWr> zc_slots_;
  std::vector<std::uint32_t> zc_free_;
  std::vector<std::unique_ptr<ClientSession>> retired_;  // detached, WRs still naming their lkey
  std::uint64_t zc_track(ClientSession& c, std::uint64_t user_data) noexcept;
  bool zc_available() const noexcept { return !zc_free_.empty(); }
  std::uint64_t zc_done(std::uint64_t user_data) noexcept;  // returns the op's own tag
  void retire(std::unique_ptr<ClientSession> s);
  void setup_zero_copy();
  std::unique_ptr<peer::ChannelManager> peers_;
  peer::RemoteOpTable remote_ops_{1024};
  std::unordered_map<std::uint32_t, ProxyEndpoint> proxies_;
  std::uint32_t next_proxy_id_ = 1;
  std::deque<StagedDelivery> staged_;
  std::uint64_t staged_bytes_ = 0;
  std::vector<std::uint32_t> blocked_proxies_;  // scratch for retry_staged
  std::uint16_t listen_port_ = 0;
  std::uint64_t next_tick_ns_ = 0;
  std::uint64_t next_publish_ns_ = 0;
  mutable std::mutex snapshot_mu_;  // control-rate only: engine publishes, control thread copies
  std::vector<peer::PeerInfo> snapshot_;
  // Fresh snapshots on demand: the control thread bumps `asked`, the engine
  // publishes on its next turn and sets `done` (under snapshot_mu_).
  static constexpr int kSnapshotWaitMs = 100;
  mutable std::atomic<std::uint64_t> snapshot_asked_{0};
  std::uint64_t snapshot_seen_ = 0;  // engine thread: last `asked` value answered
  std::uint64_t snapshot_done_ = 0;  // guarded by snapshot_mu_
  mutable std::condition_variable snapshot_cv_;
  void answer_snapshot_request();
};

}  // namespace ferry::daemon
