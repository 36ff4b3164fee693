// Serve / Unserve.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "daemon/engine.h"

namespace ferry::daemon {

void Engine::op_serve(ClientSession& c, const shm::SqEntry& e) {
  // Copy out first: the client can rewrite its arena at any moment.
  char name[kMaxServiceNameBytes];
  std::memcpy(name, c.at(e.offset), e.length);
  std::string_view sv(name, e.length);
  if (!valid_service_name(sv)) {
    bump(counters_.bad_requests);
    complete(c, shm::Op::Serve, e.user_data, Status::BadRequest);
    return;
  }
  if (c.services.size() >= kMaxServicesPerClient) {
    complete(c, shm::Op::Serve, e.user_data, Status::NoMemory);
    return;
  }
  auto r = services_.add(sv, c.id());
  if (!r) {
    complete(c, shm::Op::Serve, e.user_data, r.status);
    return;
  }
  c.services.push_back(r.value);
  c.info().services.store(static_cast<std::uint32_t>(c.services.size()), std::memory_order_relaxed);
  spdlog::info("client {} serves '{}' as service {}", c.id(), sv, r.value);
  complete(c, shm::Op::Serve, e.user_data, Status::Ok, r.value);
}

void Engine::op_unserve(ClientSession& c, const shm::SqEntry& e) {
  auto it = std::find(c.services.begin(), c.services.end(), e.handle);
  if (it == c.services.end()) {
    bump(counters_.bad_requests);
    complete(c, shm::Op::Unserve, e.user_data, Status::BadRequest);
    return;
  }
  // Calls already delivered stay in calls_ and can still be replied; parked
  // deliveries to it fail with ServiceGone on their next retry.
  services_.remove(e.handle);
  c.services.erase(it);
  c.info().services.store(static_cast<std::uint32_t>(c.services.size()), std::memory_order_relaxed);
  complete(c, shm::Op::Unserve, e.user_data, Status::Ok);
}

}  // namespace ferry::daemon
