// Send and Call: copy the payload once, from the sender's tx arena into a
// block of the receiver's rx arena, and post the Message/Request. When the
// receiver has no rx space or CQ room the op parks (FIFO per endpoint, so
// messages on one endpoint keep their order) until room frees or the
// delivery timeout passes.
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>

#include "daemon/engine.h"

namespace ferry::daemon {

namespace {

std::uint64_t steady_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

void Engine::op_send_or_call(ClientSession& c, const shm::SqEntry& e) {
  const auto op = static_cast<shm::Op>(e.op);
  auto it = c.endpoints.find(e.handle);
  if (it == c.endpoints.end()) {
    complete(c, op, e.user_data, Status::EndpointClosed);
    return;
  }
  Endpoint& ep = it->second;
  if (!ep.parked.empty()) {  // keep order behind what is already waiting
    park(c, ep, e);
    return;
  }
  Status failure = Status::Ok;
  switch (try_deliver(c, ep, e, &failure)) {
    case Delivery::Done: break;
    case Delivery::Blocked: park(c, ep, e); break;
    case Delivery::Failed: complete(c, op, e.user_data, failure); break;
  }
}

Engine::Delivery Engine::try_deliver(ClientSession& c, Endpoint& ep, const shm::SqEntry& e, Status* failure) {
  const Service* s = services_.find(ep.service_id);
  ClientSession* server = s == nullptr ? nullptr : client(s->owner);
  if (server == nullptr || server->doomed) {
    *failure = Status::ServiceGone;
    return Delivery::Failed;
  }
  if (!can_deliver(*server)) return Delivery::Blocked;
  auto block = server->rx.alloc(e.length);
  if (!block) return Delivery::Blocked;

  std::memcpy(server->at(block->offset), c.at(e.offset), e.length);
  bump(counters_.bytes_copied, e.length);

  const bool is_call = static_cast<shm::Op>(e.op) == shm::Op::Call;
  shm::CqEntry d{};
  d.kind = static_cast<std::uint8_t>(is_call ? shm::CqKind::Request : shm::CqKind::Message);
  d.handle = s->id;
  d.offset = block->offset;
  d.length = e.length;
  d.capacity = block->capacity;
  d.source = c.id();
  if (is_call) {
    d.token = calls_.insert(
        PendingCall{c.id(), ep.id, server->id(), s->id, e.user_data, e.resp_offset, e.resp_length, false});
    bump(counters_.calls);
  } else {
    bump(counters_.messages);
  }
  post(*server, d);
  // A Send is done once copied (the sender's buffer is free again); a Call
  // completes when its reply arrives.
  if (!is_call) complete(c, shm::Op::Send, e.user_data, Status::Ok);
  return Delivery::Done;
}

void Engine::park(ClientSession& c, Endpoint& ep, const shm::SqEntry& e) {
  ep.parked.push_back(Parked{e, steady_ns() + delivery_timeout_ns_});
  bump(counters_.parked);
  if (!ep.in_retry_list) {
    ep.in_retry_list = true;
    parked_endpoints_.push_back(EndpointRef{c.id(), ep.id});
  }
}

std::size_t Engine::retry_parked() {
  assert_owner();
  if (parked_endpoints_.empty()) return 0;
  std::size_t progress = 0;
  const std::uint64_t now = steady_ns();
  for (std::size_t i = 0; i < parked_endpoints_.size();) {
    const EndpointRef ref = parked_endpoints_[i];
    ClientSession* c = client(ref.client);
    Endpoint* found = nullptr;
    if (c != nullptr) {
      auto it = c->endpoints.find(ref.endpoint);
      if (it != c->endpoints.end()) found = &it->second;
    }
    if (found == nullptr) {
      parked_endpoints_[i] = parked_endpoints_.back();
      parked_endpoints_.pop_back();
      continue;
    }
    Endpoint& ep = *found;
    while (!ep.parked.empty()) {
      const Parked& p = ep.parked.front();
      const auto op = static_cast<shm::Op>(p.entry.op);
      Status failure = Status::Ok;
      Delivery d = try_deliver(*c, ep, p.entry, &failure);
      if (d == Delivery::Blocked) {
        if (now < p.deadline_ns) break;
        failure = Status::Timeout;
        bump(counters_.timeouts);
        d = Delivery::Failed;
      }
      if (d == Delivery::Failed) complete(*c, op, p.entry.user_data, failure);
      ep.parked.pop_front();
      ++progress;
    }
    if (ep.parked.empty()) {
      ep.in_retry_list = false;
      parked_endpoints_[i] = parked_endpoints_.back();
      parked_endpoints_.pop_back();
    } else {
      ++i;
    }
  }
  return progress;
}

}  // namespace ferry::daemon
