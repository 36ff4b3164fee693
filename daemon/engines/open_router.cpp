#include "daemon/engines/open_router.h"

#include <spdlog/spdlog.h>

#include <cstring>

namespace ferry::daemon {

OpenRouter::OpenRouter(const Config& config, EngineGroup& group, std::uint32_t self, Sessions& sessions,
                       LocalDelivery& local, RemoteSender& remote, Forwarder& forwarder, Counters& counters)
    : group_(group),
      self_(self),
      sessions_(sessions),
      local_(local),
      remote_(remote),
      forwarder_(forwarder),
      counters_(counters) {
  if (!config.listen.empty()) own_listen_ = parse_host_port(config.listen);
}

void OpenRouter::complete(ClientSession& c, const Operation& op, Status s) {
  if (s == Status::BadRequest) bump(counters_.bad_requests);
  sessions_.complete(c, shm::Op::Open, op.user_data, s);
}

void OpenRouter::open(ClientSession& c, const Operation& op, std::uint16_t port, std::uint8_t redirects) {
  char text[kMaxTargetBytes];
  std::memcpy(text, c.at(op.offset), op.length);  // copied out: the client may rewrite its arena
  Target t = parse_target(std::string_view(text, op.length), own_listen_, group_.ports);
  if (t.kind == TargetKind::Invalid) return complete(c, op, Status::BadRequest);
  if (c.endpoint_cap_reached()) return complete(c, op, Status::NoMemory);
  if (t.kind == TargetKind::Local) {
    const std::optional<ServiceLocation> at = group_.directory.find(t.service);
    if (!at) return complete(c, op, Status::ServiceNotFound);
    if (at->engine == self_) return local_.open(c, op, at->id);
    // A shadow runs only what its origin sent here: a service that moved
    // meanwhile is not followed from engine to engine.
    if (c.is_shadow()) return complete(c, op, Status::ServiceNotFound);
    return forwarder_.open(c, op, at->engine, 0, 0);
  }
  // Peer engine k is reached from our engine k mod N; a first Open asks
  // the peer engine at the target's own port, k = 0 for all we know.
  // (A redirected Open, or a shadow's, was routed already.)
  if (port != 0) t.remote.port = port;
  constexpr std::uint32_t kFirstContact = 0;  // our engine for peer engine 0
  if (c.is_shadow() || redirects != 0 || self_ == kFirstContact) return remote_.open(c, op, t, redirects);
  forwarder_.open(c, op, kFirstContact, 0, 0);
}

void OpenRouter::redirected(ClientSession& c, const Operation& op, std::uint16_t port, std::uint32_t peer_engine,
                            std::uint8_t redirects) {
  if (redirects > kMaxRedirects || port == 0) {
    spdlog::info("client {}: Open redirected {} times by the peer; giving up", c.id(), redirects);
    return complete(c, op, Status::ServiceNotFound);
  }
  if (c.is_shadow()) return forwarder_.redirect(c, op, port, peer_engine, redirects);
  const std::uint32_t to = peer_engine % group_.size();
  if (to == self_) return open(c, op, port, redirects);
  forwarder_.open(c, op, to, port, redirects);
}

}  // namespace ferry::daemon
