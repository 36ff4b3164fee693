#include "daemon/engines/forwarder.h"

namespace ferry::daemon {

Forwarder::Forwarder(Sessions& sessions, Counters& counters) : sessions_(sessions), counters_(counters) {}

void Forwarder::hand_over(ClientSession& c, std::uint32_t to, const Operation& op, std::uint16_t port,
                          std::uint8_t redirects) {
  const std::uint64_t bit = std::uint64_t{1} << to;
  if ((c.shadow_engines & bit) == 0) {
    // Once per engine: the executor makes the shadow before the first op.
    c.shadow_engines |= bit;
    ++c.shadow_refs;
    CrossMsg shadow;
    shadow.kind = CrossKind::Shadow;
    shadow.client = c.id();
    shadow.origin = &c;
    link_.send(to, shadow);
  }
  CrossMsg m;
  m.kind = CrossKind::Op;
  m.client = c.id();
  m.op = op;
  m.port = port;
  m.redirects = redirects;
  link_.send(to, m);
}

void Forwarder::open(ClientSession& c, const Operation& op, std::uint32_t to, std::uint16_t port,
                     std::uint8_t redirects) {
  hand_over(c, to, op, port, redirects);
}

Outcome Forwarder::offer(ClientSession& c, Endpoint& ep, const Operation& op, Attempt& at) {
  (void)at;  // the executor keeps the op's deadlines (its Dispatcher sets them)
  Operation there = op;
  there.handle = ep.forward_ep;
  hand_over(c, ep.forward_engine, there, 0, 0);
  return Outcome::done();
}

void Forwarder::close(ClientSession& c, Endpoint& ep, const Operation& op) {
  Operation there = op;
  there.handle = ep.forward_ep;
  hand_over(c, ep.forward_engine, there, 0, 0);
}

void Forwarder::client_gone(ClientSession& c) {
  for (std::uint32_t e = 0; e < 64; ++e) {
    if ((c.shadow_engines & (std::uint64_t{1} << e)) == 0) continue;
    CrossMsg m;
    m.kind = CrossKind::Gone;
    m.client = c.id();
    link_.send(e, m);
  }
  c.shadow_engines = 0;  // shadow_refs stays until each is Freed
}

void Forwarder::on_done(std::uint32_t from, const CrossMsg& m) {
  ClientSession* c = sessions_.find(m.client);
  if (c == nullptr || c->is_shadow()) return;  // detached meanwhile: nobody to tell
  shm::CqEntry e = m.cq;
  if (static_cast<shm::Op>(e.op) == shm::Op::Open && static_cast<Status>(e.status) == Status::Ok) {
    // The endpoint the client sees is ours; its ops go to `from`'s.
    if (c->endpoint_cap_reached()) {
      // Cannot happen often (the executor checked its own count); the
      // endpoint there is left to the client's detach.
      e.status = static_cast<std::uint8_t>(Status::NoMemory);
    } else {
      Endpoint& ep = c->add_endpoint(*this);
      ep.forward_engine = from;
      ep.forward_ep = e.handle;
      e.handle = ep.id;
    }
  }
  sessions_.post_done(m.client, e);
}

void Forwarder::shadow_done(const ClientSession& shadow, const shm::CqEntry& entry) noexcept {
  CrossMsg m;
  m.kind = CrossKind::Done;
  m.client = shadow.id();
  m.cq = entry;
  link_.send(shadow.origin_engine, m);
}

void Forwarder::shadow_freed(const ClientSession& shadow) noexcept {
  CrossMsg m;
  m.kind = CrossKind::Freed;
  m.client = shadow.id();
  link_.send(shadow.origin_engine, m);
}

void Forwarder::redirect(const ClientSession& shadow, const Operation& op, std::uint16_t port,
                         std::uint32_t peer_engine, std::uint8_t redirects) {
  CrossMsg m;
  m.kind = CrossKind::Redirect;
  m.client = shadow.id();
  m.op = op;
  m.port = port;
  m.peer_engine = peer_engine;
  m.redirects = redirects;
  link_.send(shadow.origin_engine, m);
}

}  // namespace ferry::daemon
