#include "daemon/local/local_delivery.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

namespace ferry::daemon {

LocalDelivery::LocalDelivery(Sessions& sessions, Calls& calls, Counters& counters)
    : sessions_(sessions), calls_(calls), counters_(counters) {}

void LocalDelivery::serve(ClientSession& c, const Operation& op) {
  // Copy out first: the client can rewrite its arena at any moment.
  char name[kMaxServiceNameBytes];
  std::memcpy(name, c.at(op.offset), op.length);
  const std::string_view sv(name, op.length);
  if (!valid_service_name(sv)) {
    bump(counters_.bad_requests);
    sessions_.complete(c, shm::Op::Serve, op.user_data, Status::BadRequest);
    return;
  }
  if (c.services.size() >= kMaxServicesPerClient) {
    sessions_.complete(c, shm::Op::Serve, op.user_data, Status::NoMemory);
    return;
  }
  auto r = services_.add(sv, c.id(), c.info().uid);
  if (!r) {
    if (r.status == Status::PermissionDenied) {
      spdlog::warn(
          "client {} ('{}', pid {}, uid {}): Serve of '{}' refused: the name is reserved to uid {} "
          "(service-owners)",
          c.id(), c.info().name, c.info().pid, c.info().uid, sv, *services_.reserved_to(sv));
    }
    sessions_.complete(c, shm::Op::Serve, op.user_data, r.status);
    return;
  }
  c.services.push_back(r.value);
  c.info().services.store(static_cast<std::uint32_t>(c.services.size()), std::memory_order_relaxed);
  spdlog::info("client {} serves '{}' as service {}", c.id(), sv, r.value);
  sessions_.complete(c, shm::Op::Serve, op.user_data, Status::Ok, r.value);
}

void LocalDelivery::unserve(ClientSession& c, const Operation& op) {
  auto it = std::find(c.services.begin(), c.services.end(), op.handle);
  if (it == c.services.end()) {
    bump(counters_.bad_requests);
    sessions_.complete(c, shm::Op::Unserve, op.user_data, Status::BadRequest);
    return;
  }
  // Calls already delivered stay open and can still be replied; waiting
  // deliveries to it fail with ServiceGone on their next try.
  services_.remove(op.handle);
  c.services.erase(it);
  c.info().services.store(static_cast<std::uint32_t>(c.services.size()), std::memory_order_relaxed);
  sessions_.complete(c, shm::Op::Unserve, op.user_data, Status::Ok);
}

void LocalDelivery::client_gone(ClientSession& gone) {
  for (std::uint32_t sid : gone.services) services_.remove(sid);
  gone.services.clear();
}

void LocalDelivery::open(ClientSession& c, const Operation& op, std::string_view service) {
  const Service* s = services_.find(service);
  if (s == nullptr) {
    sessions_.complete(c, shm::Op::Open, op.user_data, Status::ServiceNotFound);
    return;
  }
  if (c.endpoint_cap_reached()) {
    sessions_.complete(c, shm::Op::Open, op.user_data, Status::NoMemory);
    return;
  }
  Endpoint& ep = c.add_endpoint(*this);
  ep.service_id = s->id;
  sessions_.complete(c, shm::Op::Open, op.user_data, Status::Ok, ep.id);
}

Outcome LocalDelivery::offer(ClientSession& c, Endpoint& ep, const Operation& op, Attempt& at) {
  const Service* s = services_.find(ep.service_id);
  if (s == nullptr) return Outcome::failed(Status::ServiceGone);
  PendingCall call;
  call.caller = c.id();
  call.endpoint = ep.id;
  call.user_data = op.user_data;
  call.resp_offset = op.resp_offset;
  call.resp_length = op.resp_length;
  call.deadline_ns = at.call_deadline_ns;
  const Outcome o = deliver(*s, op.is_call(), c.at(op.offset), op.length, c.id(), call);
  // A Send is done once copied (the sender's buffer is free again); a Call
  // completes when its reply arrives.
  if (o.is_done() && !op.is_call()) sessions_.complete(c, shm::Op::Send, op.user_data, Status::Ok);
  return o;
}

Outcome LocalDelivery::deliver(const Service& s, bool is_call, const std::byte* payload, std::uint32_t length,
                               std::uint32_t source, PendingCall call) {
  const Reservation r = reserve(s, length);
  if (!r.outcome.is_done()) return r.outcome;
  std::memcpy(r.server->at(r.block.offset), payload, length);
  bump(counters_.bytes_copied, length);
  publish(*r.server, s, is_call, r.block, length, source, call);
  return Outcome::done();
}

LocalDelivery::Reservation LocalDelivery::reserve(const Service& s, std::uint32_t length) {
  ClientSession* owner = sessions_.find(s.owner);
  if (owner == nullptr || owner->doomed) return Reservation{Outcome::failed(Status::ServiceGone)};
  if (!sessions_.can_deliver(*owner)) return Reservation{Outcome::blocked()};
  auto b = owner->rx.alloc(length);
  if (!b) return Reservation{Outcome::blocked()};
  return Reservation{Outcome::done(), owner, *b};
}

void LocalDelivery::publish(ClientSession& server, const Service& s, bool is_call, shm::Block block,
                            std::uint32_t length, std::uint32_t source, PendingCall call) {
  shm::CqEntry d{};
  d.kind = static_cast<std::uint8_t>(is_call ? shm::CqKind::Request : shm::CqKind::Message);
  d.handle = s.id;
  d.offset = block.offset;
  d.length = length;
  d.capacity = block.capacity;
  d.source = source;
  // Who sent it, for servers that decide by it (the ps shards' access
  // lists): a local client by uid; bit 31 is ProxyServer's kRemoteSourceBit.
  if (ClientSession* from = sessions_.find(source); from != nullptr) {
    d.caller_uid = static_cast<std::uint32_t>(from->info().uid);
    d.caller_flags = shm::kCallerLocal;
  } else if ((source & (1u << 31)) != 0) {
    d.caller_flags = shm::kCallerRemote;
  }
  if (is_call) {
    call.server = server.id();
    call.service = s.id;
    d.token = calls_.open(call);
  } else {
    bump(counters_.messages);
  }
  sessions_.post(server, d);
}

}  // namespace ferry::daemon
