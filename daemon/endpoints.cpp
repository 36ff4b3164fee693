// Open / Close.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "daemon/engine.h"

namespace ferry::daemon {

void Engine::op_open(ClientSession& c, const shm::SqEntry& e) {
  char text[kMaxTargetBytes];
  std::memcpy(text, c.at(e.offset), e.length);
  const Target t = parse_target(std::string_view(text, e.length), own_listen_);
  switch (t.kind) {
    case TargetKind::Invalid:
      bump(counters_.bad_requests);
      complete(c, shm::Op::Open, e.user_data, Status::BadRequest);
      return;
    case TargetKind::Remote: op_open_remote(c, e, t); return;
    case TargetKind::Local: break;
  }
  const Service* s = services_.find(t.service);
  if (s == nullptr) {
    complete(c, shm::Op::Open, e.user_data, Status::ServiceNotFound);
    return;
  }
  if (c.endpoints.size() >= kMaxEndpointsPerClient) {
    complete(c, shm::Op::Open, e.user_data, Status::NoMemory);
    return;
  }
  std::uint32_t id = c.next_endpoint_id++;
  while (id == 0 || c.endpoints.count(id) != 0) id = c.next_endpoint_id++;  // wrapped: skip 0 and live ids
  Endpoint& ep = c.endpoints[id];
  ep.id = id;
  ep.service_id = s->id;
  c.info().endpoints.store(static_cast<std::uint32_t>(c.endpoints.size()), std::memory_order_relaxed);
  complete(c, shm::Op::Open, e.user_data, Status::Ok, id);
}

void Engine::op_close(ClientSession& c, const shm::SqEntry& e) {
  auto it = c.endpoints.find(e.handle);
  if (it == c.endpoints.end()) {
    complete(c, shm::Op::Close, e.user_data, Status::EndpointClosed);
    return;
  }
  Endpoint& ep = it->second;
  if (ep.channel != 0) close_remote(c, ep);
  // Everything in flight on it completes first, with Cancelled.
  for (const Parked& p : ep.parked) {
    complete(c, static_cast<shm::Op>(p.entry.op), p.entry.user_data, Status::Cancelled);
  }
  ep.parked.clear();
  calls_.sweep([&](PendingCall& call) {
    if (call.caller == c.id() && call.endpoint == ep.id && !call.caller_gone) {
      call.caller_gone = true;  // the late reply gets CallerGone
      complete(c, shm::Op::Call, call.user_data, Status::Cancelled);
    }
    return false;
  });
  const std::uint32_t cid = c.id();
  const std::uint32_t eid = ep.id;
  parked_endpoints_.erase(std::remove_if(parked_endpoints_.begin(), parked_endpoints_.end(),
                                         [&](const EndpointRef& r) { return r.client == cid && r.endpoint == eid; }),
                          parked_endpoints_.end());
  c.endpoints.erase(it);
  c.info().endpoints.store(static_cast<std::uint32_t>(c.endpoints.size()), std::memory_order_relaxed);
  complete(c, shm::Op::Close, e.user_data, Status::Ok);
}

}  // namespace ferry::daemon
