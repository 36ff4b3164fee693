#include "daemon/client_session.h"

#include <utility>

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

Endpoint& ClientSession::add_endpoint(Sink& sink) {
  std::uint32_t id = next_endpoint_id_++;
  while (id == 0 || endpoints.count(id) != 0) id = next_endpoint_id_++;  // wrapped: skip 0 and live ids
  Endpoint& ep = endpoints[id];
  ep.id = id;
  ep.sink = &sink;
  info_->endpoints.store(static_cast<std::uint32_t>(endpoints.size()), std::memory_order_relaxed);
  return ep;
}

Endpoint* ClientSession::find_endpoint(std::uint32_t id) noexcept {
  auto it = endpoints.find(id);
  return it == endpoints.end() ? nullptr : &it->second;
}

void ClientSession::remove_endpoint(std::uint32_t id) {
  endpoints.erase(id);
  info_->endpoints.store(static_cast<std::uint32_t>(endpoints.size()), std::memory_order_relaxed);
}

}  // namespace ferry::daemon
