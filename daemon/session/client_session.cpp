#include "daemon/session/client_session.h"

#include <utility>

#include <spdlog/spdlog.h>

namespace ferry::daemon {

ClientSession::ClientSession(std::shared_ptr<ClientInfo> info, shm::CreatedSegment segment, shm::Doorbell sq_bell_in,
                             shm::Doorbell cq_bell_in, std::uint32_t max_message_bytes)
    : sq_bell(std::move(sq_bell_in)),
      cq_bell(std::move(cq_bell_in)),
      sq(segment.view.sq_header, segment.view.sq_entries, segment.view.sq_capacity),
      cq(segment.view.cq_header, segment.view.cq_entries, segment.view.cq_capacity),
      rx(segment.view.layout.rx_offset, segment.view.layout.rx_bytes),
      bounds{segment.view.layout.tx_offset, segment.view.layout.tx_bytes, segment.view.layout.rx_offset,
             segment.view.layout.rx_bytes, max_message_bytes},
      info_(std::move(info)),
      segment_(std::move(segment)) {}

std::unique_ptr<ClientSession> ClientSession::shadow_of(const ClientSession& origin, std::uint32_t origin_engine) {
  auto info = std::make_shared<ClientInfo>();
  info->id = origin.info_->id;
  info->pid = origin.info_->pid;
  info->uid = origin.info_->uid;
  info->gid = origin.info_->gid;
  info->name = origin.info_->name;
  info->tx_bytes = origin.info_->tx_bytes;
  info->rx_bytes = origin.info_->rx_bytes;
  info->attached_at = origin.info_->attached_at;
  // The same memory, not owned: the origin's mapping stays until this is freed.
  shm::CreatedSegment view{shm::Mapping{}, origin.segment_.view};
  auto s = std::make_unique<ClientSession>(std::move(info), std::move(view), shm::Doorbell{}, shm::Doorbell{},
                                           origin.bounds.max_message_bytes);
  s->origin_engine = origin_engine;
  s->max_endpoints = origin.max_endpoints;
  return s;
}

Endpoint& ClientSession::add_endpoint(Sink& sink) {
  std::uint32_t id = next_endpoint_id_++;
  while (id == 0 || endpoints.count(id) != 0) id = next_endpoint_id_++;  // wrapped: skip 0 and live ids
  Endpoint& ep = endpoints[id];
  ep.id = id;
  ep.sink = &sink;
  info_->endpoints.store(static_cast<std::uint32_t>(endpoints.size()), std::memory_order_relaxed);
  return ep;
}

Endpoint* ClientSession::find_endpoint_slow(std::uint32_t id) noexcept {
  auto it = endpoints.find(id);
  if (it == endpoints.end()) return nullptr;
  last_endpoint_id_ = id;
  last_endpoint_ = &it->second;
  return last_endpoint_;
}

void ClientSession::remove_endpoint(std::uint32_t id) {
  if (id == last_endpoint_id_) {
    last_endpoint_id_ = 0;
    last_endpoint_ = nullptr;
  }
  endpoints.erase(id);
  info_->endpoints.store(static_cast<std::uint32_t>(endpoints.size()), std::memory_order_relaxed);
}

bool ClientSession::endpoint_cap_reached() noexcept {
  if (endpoints.size() < max_endpoints && endpoints.size() < kMaxEndpointsPerClient) return false;
  if (!endpoint_cap_logged) {
    endpoint_cap_logged = true;  // once per client: a loop of refused Opens must not flood the log
    spdlog::warn(
        "client {} ('{}', pid {}, uid {}): {} endpoints open, the max-endpoints-per-client limit; further "
        "Opens fail NoMemory",
        id(), info_->name, info_->pid, info_->uid, endpoints.size());
  }
  return true;
}

}  // namespace ferry::daemon
