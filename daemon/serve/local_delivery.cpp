#include "daemon/serve/local_delivery.h"

#include "daemon/engines/service_directory.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace ferry::daemon {

LocalDelivery::LocalDelivery(Sessions& sessions, Calls& calls, Counters& counters, ServiceDirectory& directory,
                             std::uint32_t engine)
    : sessions_(sessions), calls_(calls), counters_(counters), directory_(directory), engine_(engine) {}

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
  auto r = directory_.claim(sv, engine_, c.info().uid);
  if (!r) {
    if (r.status == Status::PermissionDenied) {
      spdlog::warn(
          "client {} ('{}', pid {}, uid {}): Serve of '{}' refused: the name is reserved to uid {} "
          "(service-owners)",
          c.id(), c.info().name, c.info().pid, c.info().uid, sv, directory_.reserved_to(sv).value_or(0));
    }
    sessions_.complete(c, shm::Op::Serve, op.user_data, r.status);
    return;
  }
  services_.add(Service{r.value, c.id(), std::string(sv)});
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
  directory_.release(op.handle);
  forget_lookups();
  c.services.erase(it);
  c.info().services.store(static_cast<std::uint32_t>(c.services.size()), std::memory_order_relaxed);
  sessions_.complete(c, shm::Op::Unserve, op.user_data, Status::Ok);
}

void LocalDelivery::client_gone(ClientSession& gone) {
  forget_lookups();  // its session, and any service it served, are going
  for (std::uint32_t sid : gone.services) {
    services_.remove(sid);
    directory_.release(sid);
  }
  gone.services.clear();
}

void LocalDelivery::open(ClientSession& c, const Operation& op, std::uint32_t service_id) {
  const Service* s = services_.find(service_id);
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

// Inline: it is most of a small delivery's work, called once on each path.
inline shm::CqEntry LocalDelivery::delivery_entry(const Service& s, shm::CqKind kind, std::uint32_t length,
                                                  std::uint32_t source, std::uint64_t token, const ClientSession* from,
                                                  std::uint8_t flags) noexcept {
  shm::CqEntry d;  // every field written (no memset call)
  d.kind = static_cast<std::uint8_t>(kind);
  d.status = 0;
  d.op = 0;
  d.flags = flags;
  d.handle = s.id;
  d.user_data = 0;
  d.offset = 0;
  d.length = length;
  d.capacity = 0;
  d.token = token;
  d.source = source;
  d.caller_uid = 0;
  d.caller_flags = 0;
  d.reserved1 = 0;
  // Who sent it, for servers that decide by it (the ps shards' access
  // lists): a local client by uid (a client of another engine runs here as
  // its shadow, same id and uid); or through a peer daemon.
  if ((source & kRemoteSourceBit) != 0) {
    d.caller_flags = shm::kCallerRemote;
  } else if (from != nullptr || (from = sessions_.find(source)) != nullptr) {
    d.caller_uid = static_cast<std::uint32_t>(from->info().uid);
    d.caller_flags = shm::kCallerLocal;
  }
  return d;
}

Outcome LocalDelivery::offer(ClientSession& c, Endpoint& ep, const Operation& op, Attempt& at) {
  if (ep.cache_gen != gen_) {
    ep.cached_service = services_.find(ep.service_id);
    ep.cached_owner = ep.cached_service != nullptr ? sessions_.find(ep.cached_service->owner) : nullptr;
    ep.cache_gen = gen_;
  }
  const Service* s = ep.cached_service;
  if (s == nullptr) return Outcome::failed(Status::ServiceGone);
  if (!op.is_call()) {
    // A Send is done once copied: the sender's buffer is free again.
    const Outcome o = deliver_to(*s, ep.cached_owner, nullptr, c.at(op.offset), op.length, c.id(), &c);
    if (o.is_done()) sessions_.complete(c, shm::Op::Send, op.user_data, Status::Ok);
    return o;
  }
  // A Call completes when its reply arrives.
  PendingCall call;
  call.caller = c.id();
  call.endpoint = ep.id;
  call.user_data = op.user_data;
  call.resp_offset = op.resp_offset;
  call.resp_length = op.resp_length;
  call.deadline_ns = at.call_deadline_ns;
  return deliver_to(*s, ep.cached_owner, &call, c.at(op.offset), op.length, c.id(), &c);
}

Outcome LocalDelivery::deliver_to(const Service& s, ClientSession* owner, const PendingCall* call,
                                  const std::byte* payload, std::uint32_t length, std::uint32_t source,
                                  const ClientSession* from) {
  if (owner == nullptr || owner->doomed) return Outcome::failed(Status::ServiceGone);
  if (!sessions_.can_deliver(*owner)) return Outcome::blocked();
  const shm::CqKind kind = call != nullptr ? shm::CqKind::Request : shm::CqKind::Message;
  if (sessions_.take_inline(*owner, length)) {
    const std::uint64_t token = call != nullptr ? open_call(*owner, s, *call) : 0;
    sessions_.post_inline(*owner, delivery_entry(s, kind, length, source, token, from, shm::kCqFlagInline), payload,
                          length);
  } else {
    const std::optional<shm::Block> b = owner->rx.alloc(length);
    if (!b) return Outcome::blocked();
    std::memcpy(owner->at(b->offset), payload, length);
    const std::uint64_t token = call != nullptr ? open_call(*owner, s, *call) : 0;
    post_delivery(*owner, s, kind, *b, length, source, token, from);
  }
  bump(counters_.bytes_copied, length);
  if (call == nullptr) bump(counters_.messages);  // calls are counted where they open
  return Outcome::done();
}

Outcome LocalDelivery::deliver(const Service& s, bool is_call, const std::byte* payload, std::uint32_t length,
                               std::uint32_t source, const PendingCall& call, const ClientSession* from) {
  return deliver_to(s, sessions_.find(s.owner), is_call ? &call : nullptr, payload, length, source, from);
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
                            std::uint32_t length, std::uint32_t source, const PendingCall& call) {
  if (!is_call) {
    bump(counters_.messages);
    post_delivery(server, s, shm::CqKind::Message, block, length, source, 0);
    return;
  }
  post_delivery(server, s, shm::CqKind::Request, block, length, source, open_call(server, s, call));
}

std::uint64_t LocalDelivery::open_call(ClientSession& server, const Service& s, const PendingCall& call) {
  PendingCall opened = call;
  opened.server = server.id();
  opened.service = s.id;
  return calls_.open(opened);
}

void LocalDelivery::post_delivery(ClientSession& server, const Service& s, shm::CqKind kind, shm::Block block,
                                  std::uint32_t length, std::uint32_t source, std::uint64_t token,
                                  const ClientSession* from) {
  shm::CqEntry d = delivery_entry(s, kind, length, source, token, from, 0);
  d.offset = block.offset;
  d.capacity = block.capacity;
  sessions_.post(server, d);
}

}  // namespace ferry::daemon
