// The datapath engine: it owns every datapath object of its clients and
// channels and runs the loop (engine_loop.cpp) on its own thread, or, while
// traffic is light, on engine 0's (engine_host.cpp, engines/compaction.h):
// one thread at a time. It is the loop and little else: each turn it asks
// each component for its work, in this order:
//
//   control link    attach/detach/stop commands from the control thread
//   channels        peer daemons: handshakes, heartbeats, their traffic (peer/)
//   dispatcher      a bounded batch from every client's SQ (session/dispatch.h)
//   parking         Sends/Calls waiting for room, local or remote (session/parking.h)
//   proxy server    peers' deliveries staged for a full receiver (serve/proxy_server.h)
//   deadlines       calls past their timeout, remote calls past their backstop
//   sessions        completions to CQs, doorbells (session/sessions.h)
//
// and sleeps on the doorbells when turns find nothing for the spin budget
// (loop/spin_policy.h). The components and who owns what: datapath.h.
// engine.cpp: set-up, the control thread's side, attach/detach. The
// control thread talks to the engine only through the control link and the
// peer snapshot; other engines only through the rings (engines/).
#pragma once

struct ibv_pd;

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/counters.h"
#include "daemon/datapath.h"
#include "daemon/engines/compaction.h"
#include "daemon/engines/engine_group.h"
#include "daemon/loop/control_link.h"
#include "daemon/loop/event_set.h"
#include "daemon/loop/peer_snapshot.h"
#include "daemon/loop/turn_stats.h"
#include "daemon/peer/transport_choice.h"

namespace ferry::daemon {

inline constexpr int kBusyPollMs = 1;  // sleep bound while deliveries wait or CQs overflow
// Tags of the engine's event set (loop/event_set.h); client ids are nonzero.
inline constexpr std::uint64_t kWakeTag = 0;
inline constexpr std::uint64_t kTransportTag = ~std::uint64_t{0};
inline constexpr int kPeerTickMs = 10;  // sleep bound while channels exist (heartbeats, deadlines)
// Engine 0's event set: a hosted engine's own event set, tagged with this
// bit and its index (engines/compaction.h).
inline constexpr std::uint64_t kHostedTag = std::uint64_t{1} << 62;

class Engine final {
 public:
  // Engine `index` of `group` (engines/engine_group.h). `epoch` identifies
  // this engine of this daemon instance to peers (nonzero; each engine has
  // its own). Makes the transports `config` asks for and listens on the
  // engine's port (throws at start-up when it cannot).
  Engine(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch, EngineGroup& group,
         std::uint32_t index);
  // A lone engine (a group of its own).
  Engine(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch = 1);
  // The same on transports made by the caller (tests: a recording transport).
  Engine(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch, Transports transports);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Control thread. false when the queue is full (the caller retries).
  [[nodiscard]] bool submit(const EngineCommand& cmd) noexcept { return control_.submit(cmd); }
  // Control thread: next client the engine detached on its own (corrupt
  // ring); readable event_fd() means some may be waiting.
  [[nodiscard]] std::optional<std::uint32_t> pop_event() noexcept { return control_.pop_event(); }
  int event_fd() const noexcept { return control_.event_fd(); }
  // Any thread: the eventfd that wakes this engine's sleep.
  int wake_fd() const noexcept { return control_.wake_fd(); }
  // Control thread: a copy of the channel table taken by the engine on its
  // next turn after this call (peer_snapshot.h).
  std::vector<peer::PeerInfo> peers_snapshot() const;
  // What carries the data lanes of channels: "rdma" or "tcp" (status JSON).
  const std::string& transport_name() const noexcept { return transports_.name; }
  // The lanes' rails (fixed at start-up; empty on tcp), for status JSON.
  const std::vector<RailFacts>& rail_facts() const noexcept { return transports_.rail_facts; }
  // Any thread: the rdma data transport's PD (client segments are
  // registered on it at attach), nullptr when the lanes are not rdma. Set
  // before the engine thread starts, never changed.
  ibv_pd* rdma_pd() const noexcept { return transports_.pd; }
  // Every rail's PD (rdma_pd() first; null past the last rail).
  std::span<ibv_pd* const> rdma_pds() const noexcept { return transports_.pds; }
  // Any thread, fixed before the engine thread starts: peers get a key per
  // call (memory windows) rather than the tx arena's (remote_keys.h).
  bool per_call_keys() const noexcept { return transports_.keys.per_call(); }
  // Bootstrap port actually bound (0: not listening).
  std::uint16_t listen_port() const noexcept { return dp_.peers->listen_port(); }

  // Start-up, once every engine of the group exists: the rings to the others.
  void join_group();
  std::uint32_t index() const noexcept { return index_; }
  // Any thread: messages this engine sent to and took from other engines.
  std::uint64_t cross_out() const noexcept { return cross_out_.load(std::memory_order_relaxed); }
  std::uint64_t cross_in() const noexcept { return cross_in_.load(std::memory_order_relaxed); }
  // Any thread: the engine whose thread runs this one's turns (its own
  // index, or 0 while hosted: engines/compaction.h).
  std::uint32_t runner() const noexcept { return compaction_.runner.load(std::memory_order_relaxed); }

  // Engine thread body; returns after a Stop command, all clients detached.
  void run();

 private:
  Engine(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch, Transports transports,
         std::unique_ptr<EngineGroup> own, EngineGroup* group, std::uint32_t index);

  // engine_loop.cpp
  std::size_t turn();
  std::size_t drain_commands();
  std::size_t poll_submissions();
  std::size_t expire();
  void reap_doomed();
  void sleep_until_work();
  bool answers_due() const noexcept;
  bool bulk_inflight() const noexcept;  // a rendezvous READ or an exposed op in flight (spin_policy.h)
  // sleep_until_work's halves, per engine (a host sleeps for its hosted
  // engines too): the handshakes that announce the sleep, false when work
  // came meanwhile, and `timeout_ms` how long it may sleep (-1: no bound);
  // then, whether or not it slept, taking the announcements back.
  bool announce_sleep(int& timeout_ms);
  void end_sleep(bool slept, bool transports, bool timed_out);
  void record_busy(std::uint64_t ns) noexcept;

  // engine_host.cpp: compacting engines (engines/compaction.h).
  bool compacting() const noexcept { return group_.compact && group_.size() > 1; }
  // Engines other than 0, on their own thread, about to sleep.
  bool may_compact(std::uint64_t now) const noexcept;
  void compact_into_host();  // returns once handed back
  // Engine 0's thread.
  void take_offered();
  std::size_t hosted_turns(std::uint64_t start, std::uint64_t& mark);
  void close_window(std::uint64_t now);
  void hand_back(std::size_t i, std::uint64_t now);
  void hand_back_all();
  void drain_hosted_events(std::uint64_t tag);
  Engine* hosted(std::uint64_t tag) noexcept;

  // engine.cpp
  void listen();
  void adopt(ClientSession* session);
  void detach(std::uint32_t client_id);
  std::size_t poll_peers();
  void publish_peers(std::uint64_t now_ns, bool force);
  std::size_t poll_cross();  // what other engines handed this one

  // The loop's own state.
  struct Loop {
    EventSet events;        // what the sleep waits on: the wake fd, SQ doorbells, transports
    std::thread::id owner;  // the engine thread
    bool stop = false;
    std::uint64_t next_tick_ns = 0;  // channels' heartbeats and deadlines
    TurnStats turns;
  };

  const Config& config_;
  Counters& counters_;
  std::unique_ptr<EngineGroup> own_group_;  // a lone engine's
  EngineGroup& group_;
  std::uint32_t index_;
  Transports transports_;                    // before everything that uses them: destroyed last
  ControlLink control_;                      // may still hold sessions (their MRs need the transports)
  Datapath dp_;                              // the components (datapath.h)
  std::atomic<std::uint64_t> cross_out_{0};  // published each turn from the forwarder's link
  std::atomic<std::uint64_t> cross_in_{0};
  mutable PeerSnapshot snapshot_;
  Loop loop_;
  Compaction compaction_;
  std::vector<Engine*> hosted_;  // engine 0: the engines its thread runs besides itself
};

}  // namespace ferry::daemon
