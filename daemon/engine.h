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
// calls.cpp (Reply and call bookkeeping).
#pragma once

#include <boost/lockfree/spsc_queue.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "daemon/calls.h"
#include "daemon/client_session.h"
#include "daemon/config.h"
#include "daemon/counters.h"
#include "daemon/services.h"
#include "daemon/target.h"
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
// Per-client caps so a client cannot grow daemon memory without bound.
inline constexpr std::size_t kMaxEndpointsPerClient = 65536;
inline constexpr std::size_t kMaxServicesPerClient =
    1024;  // sleep granularity while deliveries are parked or CQs overflow

class Engine {
 public:
  Engine(const Config& config, Counters& counters, std::uint64_t token_key);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Control thread. false when the queue is full (the caller retries).
  bool submit(const EngineCommand& cmd) noexcept;
  // Control thread: next client the engine detached on its own (corrupt
  // ring); readable event_fd() means some may be waiting.
  std::optional<std::uint32_t> pop_event() noexcept;
  int event_fd() const noexcept { return event_fd_; }

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
  Delivery try_deliver(ClientSession& c, Endpoint& ep, const shm::SqEntry& e, Status* failure);
  void park(ClientSession& c, Endpoint& ep, const shm::SqEntry& e);
  std::size_t retry_parked();

  // calls.cpp
  void op_reply(ClientSession& c, const shm::SqEntry& e);
  void op_release(ClientSession& c, const shm::SqEntry& e);
  void fail_calls_of(ClientSession& gone);

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
};

}  // namespace ferry::daemon
