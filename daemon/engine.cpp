// Engine set-up and teardown, attach/detach, and the channel layer's
// events routed to the components that own what they concern.
#include "daemon/engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "ferry/mono_clock.h"

namespace ferry::daemon {

namespace {

Transports made(const Config& config) {
  Transports t;
  make_transports(config, t);
  return t;
}

}  // namespace

std::unique_ptr<EngineGroup> lone_group(const Config& config) {
  auto g = std::make_unique<EngineGroup>(1);
  std::vector<ServiceOwner> owners;
  if (const Error bad = parse_service_owners(config.service_owners, owners); bad.failed())
    throw std::runtime_error(bad.message());  // start-up only
  g->directory.reserve(std::move(owners));
  return g;
}

Engine::Engine(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch,
               EngineGroup& group, std::uint32_t index)
    : Engine(config, counters, token_key, epoch, made(config), nullptr, &group, index) {}

Engine::Engine(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch)
    : Engine(config, counters, token_key, epoch, made(config), lone_group(config), nullptr, 0) {}

Engine::Engine(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch,
               Transports transports)
    : Engine(config, counters, token_key, epoch, std::move(transports), lone_group(config), nullptr, 0) {}

Engine::Engine(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch,
               Transports transports, std::unique_ptr<EngineGroup> own, EngineGroup* group, std::uint32_t index)
    : config_(config),
      counters_(counters),
      own_group_(std::move(own)),
      group_(own_group_ ? *own_group_ : *group),
      index_(index),
      transports_(std::move(transports)),
      control_(),
      dp_(config, counters, token_key, epoch, group_, index, transports_) {
  bool watched = loop_.events.add(control_.wake_fd(), kWakeTag);
  // The transports wake the sleep (their connects under way included);
  // poll_peers() on the next turn consumes what woke it (level-triggered).
  watched = watched && loop_.events.add(transports_.bootstrap->event_fd(), kTransportTag);
  watched = watched && loop_.events.add(dp_.peers->lanes_event_fd(), kTransportTag);
  if (!watched) throw std::runtime_error("engine setup: cannot watch its event fds");  // start-up only
  compaction_.runner.store(index_, std::memory_order_relaxed);
  listen();
  transports_.release_owner();  // set up on this thread, owned by the engine thread from run() on
}

Engine::~Engine() {
  transports_.keys.disable();  // windows first: they keep the segments' MRs they are bound to
}

void Engine::join_group() {
  if (group_.size() > 1 && group_.rings) dp_.forwarder.attach(*group_.rings, index_);
}

namespace {

// Why engine `index` could not listen, and what to change: a port in use is
// often another ferryd's PORT+i (two daemons whose --listen ports are closer
// than their engine counts), which "address in use" alone does not say.
std::string listen_failure(const std::string& listen, const HostPort& at, std::uint32_t port, std::uint32_t index,
                           std::uint32_t engines, Status status) {
  engines = std::max<std::uint32_t>(engines, 1);
  const std::string why = "cannot listen for peers on " + at.host + ":" + std::to_string(port) + " (engine " +
                          std::to_string(index) + " of " + std::to_string(engines) +
                          "): " + std::string(to_string(status));
  if (status != Status::Busy) return why + ": --listen needs a numeric address of this host";
  if (engines == 1 || at.port == 0) return why + ": the port is in use or reserved";
  return why + ": the port is in use or reserved; engine i listens on PORT+i of --listen " + listen + ", so " +
         std::to_string(engines) + " engines need ports " + std::to_string(at.port) + " to " +
         std::to_string(at.port + engines - 1) + " free (another ferryd's --listen port must be at least " +
         std::to_string(engines) + " away)";
}

}  // namespace

void Engine::listen() {
  if (config_.listen.empty()) return;
  const std::optional<HostPort> at = parse_host_port(config_.listen);
  if (!at) throw std::runtime_error("cannot parse --listen " + config_.listen);  // start-up only
  // Engine i listens on PORT+i (port 0: each picks its own); peers are
  // redirected to it for its services (engines/open_router.h).
  const std::uint32_t port = at->port == 0 ? 0 : at->port + index_;
  if (port > 0xFFFF)
    throw std::runtime_error("--listen " + config_.listen + ": no port left for engine " +
                             std::to_string(index_));  // start-up only
  auto r = dp_.peers->listen(at->host, static_cast<std::uint16_t>(port));
  if (!r) throw std::runtime_error(listen_failure(config_.listen, *at, port, index_, group_.size(), r.status));
  group_.ports[index_] = r.value;
  spdlog::info("engine {}: listening for peer daemons on {}:{}", index_, at->host, r.value);
}

std::vector<peer::PeerInfo> Engine::peers_snapshot() const {
  return snapshot_.request([this] { control_.wake(); });
}

void Engine::publish_peers(std::uint64_t now_ns, bool force) {
  if (!snapshot_.due(now_ns, force)) return;
  // Sends that failed because the peer had no receive: each one is an RNR
  // NAK, i.e. ferry posted beyond the peer's receives (a credit bug).
  counters_.rnr_naks.store(transports_.lane_transport().rnr_naks(), std::memory_order_relaxed);
  // The bootstrap listener's and, with rdma lanes, the connection manager's.
  transport::Transport::AcceptCounts accepts = transports_.bootstrap->accept_counts();
  if (transports_.lanes) {
    const transport::Transport::AcceptCounts l = transports_.lanes->accept_counts();
    accepts.refused += l.refused;
    accepts.evicted += l.evicted;
    accepts.timed_out += l.timed_out;
  }
  counters_.peer_accepts_refused.store(accepts.refused, std::memory_order_relaxed);
  counters_.peer_accepts_evicted.store(accepts.evicted, std::memory_order_relaxed);
  counters_.peer_hello_timeouts.store(accepts.timed_out, std::memory_order_relaxed);
  // The slots peer-max-connections bounds: the tcp transport's (bootstrap, and tcp lanes).
  counters_.peer_connections.store(transports_.bootstrap->connections_in_use(), std::memory_order_relaxed);
  publish_rdma_stats(transports_, counters_);
  const peer::ReceivePool& pool = dp_.peers->receive_pool();
  counters_.receive_pool.store(pool.config().receives, std::memory_order_relaxed);
  counters_.receive_pool_borrowed.store(pool.borrowed(), std::memory_order_relaxed);
  counters_.receive_pool_borrowed_max.store(pool.borrowed_max(), std::memory_order_relaxed);
  std::vector<peer::PeerInfo> fresh;
  dp_.peers->snapshot(fresh, now_ns);
  for (peer::PeerInfo& p : fresh) {
    dp_.remote.fill(p);
    dp_.proxy.fill(p);
  }
  snapshot_.publish(std::move(fresh), now_ns);
}

std::size_t Engine::poll_peers() {
  constexpr std::uint64_t kTickNs = 10'000'000;  // heartbeats and handshake deadlines at most every 10 ms
  const std::uint64_t now = dp_.deadlines.now();
  std::size_t work = dp_.peers->quiet_turn(now) ? 0 : dp_.peers->poll(now);
  if (now >= loop_.next_tick_ns) {
    loop_.next_tick_ns = now + kTickNs;
    work += dp_.peers->tick(now);
  }
  if (const bool changed = dp_.peers->take_changed(); snapshot_.due(now, changed)) publish_peers(now, changed);
  return work;
}

void Engine::adopt(ClientSession* raw) {
  std::unique_ptr<ClientSession> s(raw);
  const std::uint32_t id = s->id();
  // The client holds the read end of its CQ doorbell now (attach reply).
  s->cq_bell.release_peer();
  // Its SQ doorbell is an eventfd it shares with us, flags included: a
  // client may clear O_NONBLOCK on it. So it is never read here, where a
  // read could block: edge-triggered, each ring wakes the sleep once.
  if (!loop_.events.add(s->sq_bell.fd(), id, true)) {
    spdlog::error("client {}: cannot watch its doorbell ({}); detaching", id, std::strerror(errno));
    control_.client_thrown_out(id);
    return;
  }
  dp_.sessions.add(std::move(s));
  bump(counters_.attaches);
}

void Engine::detach(std::uint32_t id) {
  ClientSession* c = dp_.sessions.find(id);
  if (c == nullptr) return;  // already gone (engine kicked it, then the hang-up arrived)
  const bool own = !c->is_shadow();
  if (own) {
    loop_.events.remove(c->sq_bell.fd());
    spdlog::info("client {} ({}, pid {}) detached", id, c->info().name, c->info().pid);
  }
  (void)dp_.detach(id);
  if (own) bump(counters_.detaches);
}

}  // namespace ferry::daemon
