// Engine setup, the control-thread handover, and attach/detach.
#include "daemon/engine.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ferry::daemon {

namespace {

void ring_eventfd(int fd) noexcept {
  std::uint64_t one = 1;
  // EAGAIN only when the counter is near overflow: it is readable anyway.
  [[maybe_unused]] auto n = ::write(fd, &one, sizeof(one));
}

}  // namespace

Engine::Engine(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch)
    : config_(config),
      counters_(counters),
      delivery_timeout_ns_(std::uint64_t{config.delivery_timeout_ms} * 1'000'000),
      calls_(token_key, 4096) {
  if (!config.listen.empty()) own_listen_ = parse_host_port(config.listen);
  fault_.forget_call_after = config.fault_forget_call_after;
  if (fault_.armed()) {
    spdlog::warn(
        "engine: TEST-ONLY FAULT INJECTION ARMED ({}=forget-call-after={}): remote Call #{} will be "
        "forgotten (never delivered nor answered)",
        kEngineFaultEnv, fault_.forget_call_after, fault_.forget_call_after);
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (wake_fd_ < 0 || event_fd_ < 0 || epoll_fd_ < 0) {
    throw std::runtime_error(std::string("engine setup: ") + std::strerror(errno));  // start-up only
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // client ids are nonzero: 0 is the wake fd
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  clients_.reserve(config.max_clients * 2);
  order_.reserve(config.max_clients);
  parked_endpoints_.reserve(1024);
  setup_peers(epoch);
}

Engine::~Engine() {
  // Sessions never handed over (queue drained after the thread stopped).
  EngineCommand cmd;
  while (commands_.pop(cmd)) {
    if (cmd.kind == EngineCommand::Kind::Attach) delete cmd.session;
  }
  keys_.disable();  // before the segments' MRs go
  clients_.clear();
  for (int fd : {wake_fd_, event_fd_, epoll_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

bool Engine::submit(const EngineCommand& cmd) noexcept {
  if (!commands_.push(cmd)) return false;
  ring_eventfd(wake_fd_);
  return true;
}

std::optional<std::uint32_t> Engine::pop_event() noexcept {
  std::uint32_t id = 0;
  if (events_.pop(id)) return id;
  return std::nullopt;
}

void Engine::flush_events() noexcept {
  if (unsent_events_.empty()) return;
  std::size_t sent = 0;
  while (sent < unsent_events_.size() && events_.push(unsent_events_[sent])) ++sent;
  unsent_events_.erase(unsent_events_.begin(), unsent_events_.begin() + static_cast<std::ptrdiff_t>(sent));
  if (sent != 0) ring_eventfd(event_fd_);
}

ClientSession* Engine::client(std::uint32_t id) noexcept {
  auto it = clients_.find(id);
  return it == clients_.end() ? nullptr : it->second.get();
}

void Engine::adopt(ClientSession* raw) {
  assert_owner();
  std::unique_ptr<ClientSession> s(raw);
  const std::uint32_t id = s->id();
  // The client holds the read end of its CQ doorbell now (attach reply).
  s->cq_bell.release_peer();
  // Its SQ doorbell is an eventfd it shares with us, flags included: a
  // client may clear O_NONBLOCK on it. So it is never read here, where a
  // read could block: edge-triggered, each ring wakes the sleep once.
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, s->sq_bell.fd(), &ev) != 0) {
    spdlog::error("client {}: cannot watch its doorbell ({}); detaching", id, std::strerror(errno));
    unsent_events_.push_back(id);
    return;
  }
  order_.push_back(s.get());
  clients_.emplace(id, std::move(s));
  bump(counters_.attaches);
}

void Engine::detach(std::uint32_t id) {
  assert_owner();
  ClientSession* c = client(id);
  if (c == nullptr) return;  // already gone (engine kicked it, then the hang-up arrived)
  fail_calls_of(*c);
  forget_remote_of(*c);
  for (std::uint32_t sid : c->services) services_.remove(sid);
  // Its parked sends/calls have nobody to complete to; deliveries parked for
  // it fail with ServiceGone when retry_parked finds the service missing.
  parked_endpoints_.erase(std::remove_if(parked_endpoints_.begin(), parked_endpoints_.end(),
                                         [id](const EndpointRef& r) { return r.client == id; }),
                          parked_endpoints_.end());
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->sq_bell.fd(), nullptr);
  order_.erase(std::find(order_.begin(), order_.end(), c));
  spdlog::info("client {} ({}, pid {}) detached", id, c->info().name, c->info().pid);
  auto node = clients_.extract(id);
  // Unmaps the segment (and deregisters its MR) now, or once the rdma WRs
  // that name its memory have completed (zero_copy.cpp).
  if (node.mapped()->zc_inflight != 0 || node.mapped()->remote_holds != 0) retire(std::move(node.mapped()));
  bump(counters_.detaches);
}

}  // namespace ferry::daemon
