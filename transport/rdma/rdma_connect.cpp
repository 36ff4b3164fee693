// RdmaConnector::connect: the active side of rdma_cm, on a private event
// channel so its events never mix with the listener's, bounded by
// connect_timeout_ms end to end; the id moves to the shared channel once
// established. Any failure or timeout is PeerUnreachable; a reject for
// want of a slot at the peer (cm_reject.h) is Busy.
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

#include "transport/rdma/cm_reject.h"
#include "transport/rdma/device.h"
#include "transport/rdma/rdma_connector.h"

namespace ferry::transport::rdma {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kResolveAttemptMs = 2000;

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Waits for the next event on `ch` until the deadline; true when it is
// `want`. Sets *rejected to a REJECTED event's reason (cm_reject.h).
bool wait_event(rdma_event_channel* ch, rdma_cm_event_type want, Clock::time_point deadline,
                CmReject* rejected = nullptr) {
  for (;;) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) == 0) {
      const rdma_cm_event_type got = ev->event;
      const int status = ev->status;
      if (rejected != nullptr && got == RDMA_CM_EVENT_REJECTED)
        *rejected = cm_reject_reason(ev->param.conn.private_data, ev->param.conn.private_data_len);
      rdma_ack_cm_event(ev);
      if (got == want) return true;
      spdlog::info("rdma: connect: got {} (status {}) while waiting for {}", rdma_event_str(got), status,
                   rdma_event_str(want));
      return false;
    }
    if (errno != EAGAIN && errno != EINTR) return false;
    const int left = ms_left(deadline);
    if (left == 0) {
      spdlog::info("rdma: connect: timed out waiting for {}", rdma_event_str(want));
      return false;
    }
    pollfd pfd{ch->fd, POLLIN, 0};
    ::poll(&pfd, 1, left);
  }
}

}  // namespace

Result<ConnId> RdmaConnector::connect(std::string_view host, std::uint16_t port) {
  sockaddr_storage dst;
  sockaddr_storage src;
  if (!parse_sockaddr(host, port, dst)) return Result<ConnId>::fail(Status::BadRequest);
  const bool have_src = !config_.address.empty() && parse_sockaddr(config_.address, 0, src);
  const int islot = conns_.alloc_slot();
  if (islot < 0) return Result<ConnId>::fail(Status::Busy);
  const auto slot = static_cast<std::uint32_t>(islot);
  const auto deadline = Clock::now() + std::chrono::milliseconds(config_.connect_timeout_ms);

  rdma_event_channel* ch = rdma_create_event_channel();
  if (ch == nullptr) return Result<ConnId>::fail(Status::NoMemory);
  const int fl = fcntl(ch->fd, F_GETFL);
  fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
  RdmaConnection& c = conns_[slot];
  // Address resolution in short attempts: the first one to a new neighbour
  // may only start ARP, and the kernel does not always finish the request
  // when the reply comes (seen on rxe in the VM); a fresh attempt then finds
  // the neighbour resolved.
  rdma_cm_id* id = nullptr;
  bool ok = false;
  for (int attempt = 1;; ++attempt) {
    if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) != 0) {
      rdma_destroy_event_channel(ch);
      return Result<ConnId>::fail(Status::NoMemory);
    }
    const int t = std::clamp(ms_left(deadline), 1, kResolveAttemptMs);
    ok = rdma_resolve_addr(id, have_src ? reinterpret_cast<sockaddr*>(&src) : nullptr,
                           reinterpret_cast<sockaddr*>(&dst), t) == 0 &&
         wait_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED,
                    std::min(deadline, Clock::now() + std::chrono::milliseconds(t + 500)));
    if (ok || ms_left(deadline) == 0) break;
    spdlog::info("rdma: connect {}:{}: address resolution attempt {} failed; retrying", host, port, attempt);
    rdma_destroy_id(id);
    id = nullptr;
  }
  if (ok && id->verbs != ctx_) {
    spdlog::error("rdma: route to {} leaves through device {}, not {}", host,
                  id->verbs ? ibv_get_device_name(id->verbs->device) : "?", device_name());
    ok = false;
  }
  ok = ok && rdma_resolve_route(id, std::max(ms_left(deadline), 1)) == 0 &&
       wait_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline);
  ok = ok && qps_.setup(slot, id, false) == Status::Ok;
  CmReject rejected = CmReject::Unknown;
  if (ok) {
    rdma_conn_param p;
    qps_.conn_param(p, c.qp->qp_num);
    // A QP made outside rdma_cm gets CONNECT_RESPONSE: ferry moves it to
    // RTS and confirms with rdma_establish.
    ok = rdma_connect(id, &p) == 0 && wait_event(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, deadline, &rejected) &&
         qps_.to_rts(slot) == Status::Ok && rdma_establish(id) == 0;
  }
  ok = ok && rdma_migrate_id(id, channel_) == 0;
  if (!ok) {
    spdlog::info("rdma: connect {}:{} from {} failed{}{}", host, port, have_src ? config_.address : "any",
                 rejected != CmReject::Unknown ? ": " : "",
                 rejected != CmReject::Unknown ? cm_reject_text(rejected) : "");
    if (c.qp != nullptr) ibv_destroy_qp(c.qp);
    c.qp = nullptr;
    c.id = nullptr;
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
    return Result<ConnId>::fail(rejected == CmReject::NoRoom ? Status::Busy : Status::PeerUnreachable);
  }
  rdma_destroy_event_channel(ch);
  c.state = ConnState::Open;
  spdlog::debug("rdma: connected to {}:{} as connection {}", host, port, slot);
  return Result<ConnId>::ok(conns_.id_of(slot));
}

}  // namespace ferry::transport::rdma
