// Our clients' side of remote endpoints: bringing up the transport and the
// channel manager, Open("HOST:PORT/SERVICE") over a channel and the peer's
// OpenAck. Send/Call/Close on a remote endpoint: remote_send.cpp.
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

#include <chrono>
#include <cstring>

#include "daemon/engine.h"
#include "daemon/mono_clock.h"
#include "daemon/peer/auth_secret.h"
#include "daemon/transport_choice.h"
#include "ferry_config.h"
#include "transport/tcp/tcp_transport.h"
#if FERRY_HAVE_RDMA
#include "transport/rdma/rdma_transport.h"
#endif

namespace ferry::daemon {

namespace {

constexpr std::uint64_t kTickNs = 10'000'000;      // heartbeat/deadline checks at most every 10 ms
constexpr std::uint64_t kPublishNs = 200'000'000;  // status snapshot refresh

}  // namespace

void Engine::setup_peers(std::uint64_t epoch) {
  transport::tcp::TcpConfig tc;
  tc.connect_timeout_ms = config_.connect_timeout_ms;
  tc.max_message_bytes = std::max<std::uint32_t>(config_.max_message_bytes, wire::kMinMessageBytes);
  auto t = transport::tcp::TcpTransport::create(tc);
  if (!t) throw std::runtime_error("tcp transport: cannot create (" + std::string(to_string(t.status)) + ")");
  transport::tcp::TcpTransport* tcp = t.value.get();
  transport_ = std::move(t.value);
  DataTransport data = make_data_transport(config_);
  if (!data.error.empty()) throw std::runtime_error(data.error);  // start-up only: --transport rdma cannot be had
  spdlog::info("{}", data.choice.reason);
  transport_name_ = data.choice.name;
  lanes_transport_ = std::move(data.transport);
  lane_max_message_ = lane_max_message(config_, lanes_transport_.get());
  setup_zero_copy();
  setup_rendezvous();
  peer::ChannelConfig cc;
  cc.epoch = epoch;
  cc.heartbeat_ms = config_.heartbeat_ms;
  cc.peer_timeout_ms = config_.peer_timeout_ms;
  cc.connect_timeout_ms = config_.connect_timeout_ms;
  cc.lanes = config_.channel_conns;
  cc.max_message_bytes = std::max<std::uint32_t>(lane_max_message_, wire::kMinMessageBytes);
  if (auto bad = peer::load_auth_secret(config_.auth_secret_file, cc.auth_secret)) throw std::runtime_error(*bad);
  peers_ = std::make_unique<peer::ChannelManager>(*transport_, static_cast<peer::ChannelEvents&>(*this), cc, counters_,
                                                  lanes_transport_.get());
  blocked_proxies_.reserve(256);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTransportTag;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, transport_->event_fd(), &ev);
  if (peers_->lanes_event_fd() >= 0) ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, peers_->lanes_event_fd(), &ev);
  // Pending peer connects: wakes the engine when one finishes (poll_peers).
  if (peers_->connects_event_fd() >= 0) ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, peers_->connects_event_fd(), &ev);
  listen_peers();
  tcp->release_owner();  // set up on this thread, owned by the engine thread from run() on
  if (lanes_transport_) release_lanes_owner();
}

void Engine::release_lanes_owner() noexcept {
#if FERRY_HAVE_RDMA
  if (auto* r = dynamic_cast<transport::rdma::RdmaTransport*>(lanes_transport_.get())) r->release_owner();
#endif
}

void Engine::listen_peers() {
  if (!own_listen_) return;
  auto r = peers_->listen(own_listen_->host, own_listen_->port);
  if (!r) {
    throw std::runtime_error("cannot listen for peers on " + config_.listen + " (" + std::string(to_string(r.status)) +
                             "; numeric host, free port)");  // start-up only
  }
  listen_port_ = r.value;
  spdlog::info("listening for peer daemons on {}", config_.listen);
}

std::size_t Engine::poll_peers() {
  const std::uint64_t now = now_ns();
  std::size_t work = peers_->poll(now);
  if (now >= next_tick_ns_) {
    next_tick_ns_ = now + kTickNs;
    work += peers_->tick(now);
    publish_peers(now, false);
  }
  return work;
}

void Engine::publish_peers(std::uint64_t now_ns, bool force) {
  if (!force && now_ns < next_publish_ns_) return;
  next_publish_ns_ = now_ns + kPublishNs;
#if FERRY_HAVE_RDMA
  // Sends that failed with RNR retries exceeded: rnr_retry is 0, so each is
  // one RNR NAK, i.e. ferry posted beyond the peer's receives (a credit bug).
  if (auto* r = dynamic_cast<transport::rdma::RdmaTransport*>(lanes_transport_.get())) {
    counters_.rnr_naks.store(r->stats().rnr_retry_exceeded, std::memory_order_relaxed);
  }
#endif
  std::vector<peer::PeerInfo> fresh;
  peers_->snapshot(fresh, now_ns);
  std::lock_guard lock(snapshot_mu_);
  snapshot_.swap(fresh);
}

std::vector<peer::PeerInfo> Engine::peers_snapshot() const {
  // Ask the engine for a fresh copy and wait for its next turn, so counters
  // shown right after traffic include it. A stalled engine costs the caller
  // kSnapshotWaitMs and yields the last published copy.
  const std::uint64_t want = snapshot_asked_.fetch_add(1, std::memory_order_acq_rel) + 1;
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
  std::unique_lock lock(snapshot_mu_);
  snapshot_cv_.wait_for(lock, std::chrono::milliseconds(kSnapshotWaitMs), [&] { return snapshot_done_ >= want; });
  return snapshot_;
}

void Engine::answer_snapshot_request() {
  const std::uint64_t asked = snapshot_asked_.load(std::memory_order_acquire);
  if (asked == snapshot_seen_) return;  // the common case: one relaxed-cost load per turn
  snapshot_seen_ = asked;
  publish_peers(mono_ns(), true);
  {
    std::lock_guard lock(snapshot_mu_);
    snapshot_done_ = asked;
  }
  snapshot_cv_.notify_all();
}

void Engine::op_open_remote(ClientSession& c, const shm::SqEntry& e, const Target& t) {
  std::string host = t.remote.host == "localhost" ? std::string("127.0.0.1") : t.remote.host;
  if (t.remote.port == 0 || t.service.empty() || t.service.size() > wire::kMaxServiceNameBytes) {
    bump(counters_.bad_requests);
    complete(c, shm::Op::Open, e.user_data, Status::BadRequest);
    return;
  }
  if (c.endpoints.size() >= kMaxEndpointsPerClient) {
    complete(c, shm::Op::Open, e.user_data, Status::NoMemory);
    return;
  }
  const std::string address =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(t.remote.port);
  auto ch = peers_->connect(address, host, t.remote.port, mono_ns());
  if (!ch) {
    complete(c, shm::Op::Open, e.user_data, ch.status);
    return;
  }
  peer::RemoteOp op;
  op.kind = peer::RemoteOpKind::Open;
  op.client = c.id();
  op.channel = ch.value;
  op.user_data = e.user_data;
  op.service = std::string(t.service);
  const std::uint64_t token = remote_ops_.insert(std::move(op));
  // Up already: ask now. Otherwise on_channel_up sends it.
  if (peer::Channel* up = peers_->route(ch.value)) send_open(token, *remote_ops_.find(token), *up);
  publish_peers(mono_ns(), true);
}

void Engine::send_open(std::uint64_t token, peer::RemoteOp& op, peer::Channel& ch) {
  wire::Header h;
  h.type = wire::MsgType::Open;
  h.token = token;
  h.src_ep = static_cast<std::uint32_t>(token);  // provisional id until OpenAck; answers match by token
  op.channel = ch.id;
  op.sent = true;
  const auto* name = reinterpret_cast<const std::byte*>(op.service.data());
  const auto r =
      peers_->send(ch, 0, h, name, static_cast<std::uint32_t>(op.service.size()), WrTag::remote_op(token), false);
  if (r.accepted != 1) {
    ClientSession* c = client(op.client);
    const std::uint64_t user_data = op.user_data;
    remote_ops_.erase(token);
    if (c != nullptr)
      complete(*c, shm::Op::Open, user_data, r.status == Status::Busy ? Status::Busy : Status::PeerReset);
  }
}

void Engine::on_open_ack(peer::Channel& ch, const wire::Header& h) {
  peer::RemoteOp* found = remote_ops_.find(h.token);
  if (found == nullptr || found->kind != peer::RemoteOpKind::Open || found->channel != ch.id) return;
  const peer::RemoteOp op = *found;
  remote_ops_.erase(h.token);
  ClientSession* c = client(op.client);
  if (c == nullptr || c->doomed) {
    if (h.status == Status::Ok) {  // nobody wants it any more: let the peer drop its proxy
      wire::Header bye;
      bye.type = wire::MsgType::Close;
      bye.dst_ep = h.src_ep;
      peers_->send(ch, 0, bye, nullptr, 0, 0, false);
    }
    return;
  }
  if (h.status != Status::Ok) {
    complete(*c, shm::Op::Open, op.user_data, h.status);
    return;
  }
  std::uint32_t id = c->next_endpoint_id++;
  while (id == 0 || c->endpoints.count(id) != 0) id = c->next_endpoint_id++;
  Endpoint& ep = c->endpoints[id];
  ep.id = id;
  ep.channel = ch.id;
  ep.remote_ep = h.src_ep;
  peers_->bind_endpoint(ch);
  c->info().endpoints.store(static_cast<std::uint32_t>(c->endpoints.size()), std::memory_order_relaxed);
  complete(*c, shm::Op::Open, op.user_data, Status::Ok, id);
}

}  // namespace ferry::daemon
