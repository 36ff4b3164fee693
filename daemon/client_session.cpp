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

}  // namespace ferry::daemon
