// Engine set-up and teardown, attach/detach, and the channel layer's
// events routed to the components that own what they concern.
#include "daemon/engine.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "daemon/mono_clock.h"
#include "daemon/peer/auth_secret.h"
#include "daemon/remote/wr_tag.h"

namespace ferry::daemon {

namespace {

Transports made(const Config& config) {
  Transports t;
  make_transports(config, t);
  return t;
}

peer::ChannelConfig channel_config(const Config& config, std::uint64_t epoch, std::uint32_t lane_max_message) {
  peer::ChannelConfig cc;
  cc.epoch = epoch;
  cc.heartbeat_ms = config.heartbeat_ms;
  cc.peer_timeout_ms = config.peer_timeout_ms;
  cc.connect_timeout_ms = config.connect_timeout_ms;
  cc.lanes = config.channel_conns;
  cc.max_channels = config.max_channels;
  cc.receive_pool = config.receive_pool;
  cc.credit_floor = config.credit_floor;
  cc.credit_share = config.credit_share;
  cc.max_message_bytes = std::max<std::uint32_t>(lane_max_message, wire::kMinMessageBytes);
  if (auto bad = peer::load_auth_secret(config.auth_secret_file, cc.auth_secret)) throw std::runtime_error(*bad);
  return cc;
}

EngineFault fault_of(const Config& config) {
  EngineFault f;
  f.forget_call_after = config.fault_forget_call_after;
  if (f.armed()) {
    spdlog::warn(
        "engine: TEST-ONLY FAULT INJECTION ARMED ({}=forget-call-after={}): remote Call #{} will be "
        "forgotten (never delivered nor answered)",
        kEngineFaultEnv, f.forget_call_after, f.forget_call_after);
  }
  return f;
}

}  // namespace

Engine::Engine(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch)
    : Engine(config, counters, token_key, epoch, made(config)) {}

Engine::Engine(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch,
               Transports transports)
    : config_(config),
      counters_(counters),
      transports_(std::move(transports)),
      control_(),
      deadlines_(config.delivery_timeout_ms, config.peer_timeout_ms),
      sessions_(counters, config.max_clients),
      peers_(std::make_unique<peer::ChannelManager>(*transports_.bootstrap, static_cast<peer::ChannelEvents&>(*this),
                                                    channel_config(config, epoch, transports_.lane_max_message),
                                                    counters, transports_.lanes.get())),
      parking_(sessions_, deadlines_, counters),
      remote_(config, sessions_, *peers_, parking_, deadlines_, transports_.keys, counters, transports_.remote_access(),
              transports_.lane_max_message),
      calls_(sessions_, *peers_, deadlines_, counters, token_key, transports_.lane_max_message),
      local_(sessions_, calls_, counters),
      proxy_(config, *peers_, sessions_, local_, calls_, deadlines_, counters, fault_of(config)),
      dispatcher_(config, sessions_, parking_, deadlines_, local_, calls_, remote_, counters) {
  bool watched = loop_.events.add(control_.wake_fd(), kWakeTag);
  // The transports wake the sleep (their connects under way included);
  // poll_peers() on the next turn consumes what woke it (level-triggered).
  watched = watched && loop_.events.add(transports_.bootstrap->event_fd(), kTransportTag);
  watched = watched && loop_.events.add(peers_->lanes_event_fd(), kTransportTag);
  if (!watched) throw std::runtime_error("engine setup: cannot watch its event fds");  // start-up only
  std::vector<ServiceOwner> owners;
  if (auto bad = parse_service_owners(config_.service_owners, owners)) throw std::runtime_error(*bad);  // start-up only
  local_.reserve_names(std::move(owners));
  peers_->set_rails(transports_.rails);  // several rails: lanes spread over them
  listen();
  transports_.release_owner();  // set up on this thread, owned by the engine thread from run() on
}

Engine::~Engine() {
  transports_.keys.disable();  // windows first: they keep the segments' MRs they are bound to
}

void Engine::listen() {
  if (config_.listen.empty()) return;
  const std::optional<HostPort> at = parse_host_port(config_.listen);
  if (!at) throw std::runtime_error("cannot parse --listen " + config_.listen);  // start-up only
  auto r = peers_->listen(at->host, at->port);
  if (!r) {
    throw std::runtime_error("cannot listen for peers on " + config_.listen + " (" + std::string(to_string(r.status)) +
                             "; numeric host, free port)");  // start-up only
  }
  spdlog::info("listening for peer daemons on {}", config_.listen);
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
  publish_rdma_stats(transports_, counters_);
  const peer::ReceivePool& pool = peers_->receive_pool();
  counters_.receive_pool.store(pool.config().receives, std::memory_order_relaxed);
  counters_.receive_pool_borrowed.store(pool.borrowed(), std::memory_order_relaxed);
  counters_.receive_pool_borrowed_max.store(pool.borrowed_max(), std::memory_order_relaxed);
  std::vector<peer::PeerInfo> fresh;
  peers_->snapshot(fresh, now_ns);
  for (peer::PeerInfo& p : fresh) {
    remote_.fill(p);
    proxy_.fill(p);
  }
  snapshot_.publish(std::move(fresh), now_ns);
}

std::size_t Engine::poll_peers() {
  constexpr std::uint64_t kTickNs = 10'000'000;  // heartbeats and handshake deadlines at most every 10 ms
  const std::uint64_t now = deadlines_.now();
  std::size_t work = peers_->poll(now);
  if (now >= loop_.next_tick_ns) {
    loop_.next_tick_ns = now + kTickNs;
    work += peers_->tick(now);
  }
  publish_peers(now, peers_->take_changed());
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
  sessions_.add(std::move(s));
  bump(counters_.attaches);
}

void Engine::detach(std::uint32_t id) {
  ClientSession* c = sessions_.find(id);
  if (c == nullptr) return;  // already gone (engine kicked it, then the hang-up arrived)
  calls_.client_gone(*c);
  calls_.replier().client_gone(id);
  remote_.client_gone(*c);
  local_.client_gone(*c);
  parking_.client_gone(id);
  loop_.events.remove(c->sq_bell.fd());
  spdlog::info("client {} ({}, pid {}) detached", id, c->info().name, c->info().pid);
  // Unmaps the segment (and deregisters its MR) now, or once the rdma WRs
  // and peer accesses that name its memory have ended.
  sessions_.remove(id);
  bump(counters_.detaches);
}

void Engine::on_channel_up(peer::Channel& ch) { remote_.on_channel_up(ch); }

bool Engine::channel_idle(const peer::Channel& ch) { return !remote_.has_ops_on(ch.id); }

void Engine::on_channel_down(peer::Channel& ch, Status why) {
  // Exactly once per channel: everything that depended on it ends.
  remote_.channel_down(ch, why);
  calls_.replier().channel_down(ch.id);
  calls_.channel_down(ch.id);
  proxy_.channel_down(ch.id);
}

void Engine::on_message(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload) {
  switch (h.type) {
    case wire::MsgType::Open: proxy_.on_open(ch, lane, h, payload); break;
    case wire::MsgType::OpenAck: remote_.on_open_ack(ch, h); break;
    case wire::MsgType::Close: proxy_.on_close(ch, h); break;
    case wire::MsgType::Send:
    case wire::MsgType::Call:
    case wire::MsgType::RendezvousReq: proxy_.on_delivery(ch, lane, h, payload); break;
    case wire::MsgType::Response: remote_.on_response(ch, h, payload); break;
    case wire::MsgType::WriteDone: remote_.on_write_done(ch, h); break;
    case wire::MsgType::RailKeys: peers_->on_rail_keys(ch, lane, h, payload); break;
    default:
      // Types this daemon does not speak on a lane: a peer that sends them
      // anyway is ignored rather than trusted.
      spdlog::debug("channel {}: ignoring {}", ch.id, to_string(h.type));
      break;
  }
}

void Engine::on_send_done(std::uint64_t user_data, Status status) {
  WrTag tag = WrTag::decode(user_data);
  // A WR that named a client's memory: releases the client's hold first.
  if (tag.kind == WrKind::ZeroCopy) tag = WrTag::decode(sessions_.wr_done(user_data));
  switch (tag.kind) {
    case WrKind::RemoteOp: remote_.on_send_done(tag.token(), status); break;
    case WrKind::Reply: calls_.replier().on_send_done(tag.token(), status); break;
    case WrKind::Read: proxy_.on_read_done(tag.slot, tag.generation, status); break;
    case WrKind::ZeroCopy:
    case WrKind::None: break;  // untracked (answers, acks), or a slot already settled
  }
}

}  // namespace ferry::daemon
