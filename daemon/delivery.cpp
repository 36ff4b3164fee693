// Send and Call: copy the payload once, from the sender's tx arena into a
// block of the receiver's rx arena, and post the Message/Request. When the
// receiver has no rx space or CQ room the op parks (FIFO per endpoint, so
// messages on one endpoint keep their order) until room frees or the
// delivery timeout passes.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "daemon/engine.h"
#include "daemon/mono_clock.h"

namespace ferry::daemon {

void Engine::op_send_or_call(ClientSession& c, const shm::SqEntry& e) {
  const auto op = static_cast<shm::Op>(e.op);
  auto it = c.endpoints.find(e.handle);
  if (it == c.endpoints.end()) {
    complete(c, op, e.user_data, Status::EndpointClosed);
    return;
  }
  Endpoint& ep = it->second;
  // A local Call's timeout counts from here: time parked counts (a remote
  // one's counts at the serving daemon).
  const std::uint64_t call_deadline = op == shm::Op::Call && ep.channel == 0 ? deadline_after(call_timeout_of(e)) : 0;
  if (!ep.parked.empty()) {  // keep order behind what is already waiting
    park(c, ep, e, call_deadline);
    return;
  }
  Status failure = Status::Ok;
  switch (try_deliver(c, ep, e, &failure, 0, 0, call_deadline)) {
    case Delivery::Done: break;
    case Delivery::Blocked: park(c, ep, e, call_deadline); break;
    case Delivery::Failed: complete(c, op, e.user_data, failure); break;
  }
}

Engine::Delivery Engine::try_deliver(ClientSession& c, Endpoint& ep, const shm::SqEntry& e, Status* failure,
                                     std::uint64_t seq, std::uint64_t deadline_ns, std::uint64_t call_deadline_ns) {
  // A remote endpoint is Blocked by a full send window or a backoff (remote_send.cpp).
  if (ep.channel != 0) return try_send_remote(c, ep, e, failure, seq, deadline_ns);
  const Service* s = services_.find(ep.service_id);
  if (s == nullptr) {
    *failure = Status::ServiceGone;
    return Delivery::Failed;
  }
  const bool is_call = static_cast<shm::Op>(e.op) == shm::Op::Call;
  PendingCall call;
  call.caller = c.id();
  call.endpoint = ep.id;
  call.user_data = e.user_data;
  call.resp_offset = e.resp_offset;
  call.resp_length = e.resp_length;
  call.deadline_ns = call_deadline_ns;
  const Delivery d = deliver(*s, is_call, c.at(e.offset), e.length, c.id(), call, failure);
  // A Send is done once copied (the sender's buffer is free again); a Call
  // completes when its reply arrives.
  if (d == Delivery::Done && !is_call) complete(c, shm::Op::Send, e.user_data, Status::Ok);
  return d;
}

Engine::Delivery Engine::deliver(const Service& s, bool is_call, const std::byte* payload, std::uint32_t length,
                                 std::uint32_t source, PendingCall call, Status* failure) {
  ClientSession* server = nullptr;
  shm::Block block{};
  const Delivery d = reserve_rx(s, length, &server, &block, failure);
  if (d != Delivery::Done) return d;
  std::memcpy(server->at(block.offset), payload, length);
  bump(counters_.bytes_copied, length);
  publish(*server, s, is_call, block, length, source, call);
  return Delivery::Done;
}

Engine::Delivery Engine::reserve_rx(const Service& s, std::uint32_t length, ClientSession** server, shm::Block* block,
                                    Status* failure) {
  ClientSession* owner = client(s.owner);
  if (owner == nullptr || owner->doomed) {
    *failure = Status::ServiceGone;
    return Delivery::Failed;
  }
  if (!can_deliver(*owner)) return Delivery::Blocked;
  auto b = owner->rx.alloc(length);
  if (!b) return Delivery::Blocked;
  *server = owner;
  *block = *b;
  return Delivery::Done;
}

void Engine::publish(ClientSession& server, const Service& s, bool is_call, shm::Block block, std::uint32_t length,
                     std::uint32_t source, PendingCall call) {
  shm::CqEntry d{};
  d.kind = static_cast<std::uint8_t>(is_call ? shm::CqKind::Request : shm::CqKind::Message);
  d.handle = s.id;
  d.offset = block.offset;
  d.length = length;
  d.capacity = block.capacity;
  d.source = source;
  if (is_call) {
    call.server = server.id();
    call.service = s.id;
    note_deadline(call.deadline_ns);
    d.token = calls_.insert(call);
    bump(counters_.calls);
  } else {
    bump(counters_.messages);
  }
  post(server, d);
}

void Engine::park(ClientSession& c, Endpoint& ep, const shm::SqEntry& e, std::uint64_t call_deadline_ns) {
  ep.parked.push_back(Parked{e, waiting_deadline(call_deadline_ns), 0, ep.stall_counted, call_deadline_ns});
  ep.stall_counted = false;
  bump(counters_.parked);
  if (!ep.in_retry_list) {
    ep.in_retry_list = true;
    parked_endpoints_.push_back(EndpointRef{c.id(), ep.id});
  }
}

// Fair release (README "Flow control"): parked_endpoints_ is a queue in
// waiting order. Each pass offers every endpoint one try of its front op;
// one that moved an op goes to the back, one still blocked keeps its place,
// so when a send window frees a slot the endpoint that has waited longest
// takes it instead of whichever sits first in the list taking every slot.
// Passes repeat while any op moves, so nothing is left that could go now.
std::size_t Engine::retry_parked() {
  assert_owner();
  if (parked_endpoints_.empty()) return 0;
  std::size_t progress = 0;
  const std::uint64_t now = now_ns();
  for (bool moved = true; moved;) {
    moved = false;
    const std::size_t n = parked_endpoints_.size();
    std::size_t i = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const auto at = [&] { return parked_endpoints_.begin() + static_cast<std::ptrdiff_t>(i); };
      const EndpointRef ref = *at();
      ClientSession* c = client(ref.client);
      Endpoint* found = nullptr;
      if (c != nullptr) {
        auto it = c->endpoints.find(ref.endpoint);
        if (it != c->endpoints.end()) found = &it->second;
      }
      if (found == nullptr) {
        parked_endpoints_.erase(at());  // keeps the others' order (no swap-remove)
        continue;
      }
      Endpoint& ep = *found;
      if (ep.parked.empty()) {
        ep.in_retry_list = false;
        parked_endpoints_.erase(at());
        continue;
      }
      Parked& p = ep.parked.front();
      const auto op = static_cast<shm::Op>(p.entry.op);
      Status failure = Status::Ok;
      ep.stall_counted = p.stalled;
      Delivery d = try_deliver(*c, ep, p.entry, &failure, p.seq, p.deadline_ns, p.call_deadline_ns);
      p.stalled = ep.stall_counted;
      ep.stall_counted = false;
      if (d == Delivery::Blocked) {
        if (now < p.deadline_ns) {
          ++i;  // still waiting: keeps its place in the queue
          continue;
        }
        failure = Status::Timeout;
        bump(counters_.timeouts);
        d = Delivery::Failed;
        // A refused op given up: the peer waits for it; the next one sent
        // tells it to stop waiting (remote_send.cpp).
        if (p.seq != 0 && (ep.resync_seq == 0 || p.seq < ep.resync_seq)) ep.resync_seq = p.seq;
      }
      if (d == Delivery::Failed) complete(*c, op, p.entry.user_data, failure);
      ep.parked.pop_front();
      ++progress;
      moved = true;
      if (ep.parked.empty()) {
        ep.in_retry_list = false;
        parked_endpoints_.erase(at());
      } else {  // had its turn: to the back of the queue
        std::rotate(at(), at() + 1, parked_endpoints_.end());
      }
    }
  }
  return progress;
}

}  // namespace ferry::daemon
