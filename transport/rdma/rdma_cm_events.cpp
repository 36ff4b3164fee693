// RdmaConnector: listening, the cm events of every connection and the
// passive side of a connection (connect requests). Control path, driven
// from poll()'s slow sources: may log.
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "transport/rdma/device.h"
#include "transport/rdma/rdma_connector.h"

namespace ferry::transport::rdma {
namespace {

constexpr int kListenBacklog = 128;

}  // namespace

const char* RdmaConnector::device_name() const noexcept {
  return ctx_ == nullptr ? "" : ibv_get_device_name(ctx_->device);
}

Result<std::uint16_t> RdmaConnector::listen(std::string_view host, std::uint16_t port) {
  if (listen_id_ != nullptr) return Result<std::uint16_t>::fail(Status::Busy);
  sockaddr_storage ss;
  if (!parse_sockaddr(host, port, ss)) return Result<std::uint16_t>::fail(Status::BadRequest);
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel_, &id, nullptr, RDMA_PS_TCP) != 0) return Result<std::uint16_t>::fail(Status::NoMemory);
  if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&ss)) != 0) {
    const int err = errno;
    rdma_destroy_id(id);
    spdlog::error("rdma: cannot bind {}:{}: {}", host, port, std::strerror(err));
    return Result<std::uint16_t>::fail(err == EADDRINUSE ? Status::Busy : Status::BadRequest);
  }
  if (id->verbs != nullptr && id->verbs != ctx_) {
    spdlog::error("rdma: {} belongs to device {}, not {}", host, ibv_get_device_name(id->verbs->device), device_name());
    rdma_destroy_id(id);
    return Result<std::uint16_t>::fail(Status::BadRequest);
  }
  if (rdma_listen(id, kListenBacklog) != 0) {
    spdlog::error("rdma: rdma_listen on {}:{}: {}", host, port, std::strerror(errno));
    rdma_destroy_id(id);
    return Result<std::uint16_t>::fail(Status::BadRequest);
  }
  listen_id_ = id;
  const std::uint16_t bound = ntohs(rdma_get_src_port(id));
  spdlog::info("rdma: {} listening on {}:{}", device_name(), host, bound);
  return Result<std::uint16_t>::ok(bound);
}

void RdmaConnector::close_listener() noexcept {
  if (listen_id_ != nullptr) rdma_destroy_id(listen_id_);
  listen_id_ = nullptr;
}

void RdmaConnector::abandon(std::uint32_t slot) noexcept { connect_failed(slot, "closed by its owner", Status::Ok); }

void RdmaConnector::handle_events() noexcept {
  rdma_cm_event* ev = nullptr;
  while (rdma_get_cm_event(channel_, &ev) == 0) {
    // Copy what is needed and ack first: rdma_destroy_id waits for the acks
    // of its id's events, and the handlers below may destroy it.
    const rdma_cm_event_type type = ev->event;
    rdma_cm_id* id = ev->id;
    const int status = ev->status;
    rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      on_connect_request(id);
      continue;
    }
    const auto slot = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(id->context));
    if (id == listen_id_ || slot >= conns_.size() || conns_[slot].id != id) continue;
    RdmaConnection& c = conns_[slot];
    if (c.state == ConnState::Connecting) {
      on_connect_event(slot, type, status);
      continue;
    }
    switch (type) {
      case RDMA_CM_EVENT_ESTABLISHED:
        if (c.state == ConnState::Accepting) {
          --conns_.accepting;
          c.state = ConnState::Open;
          c.report_accepted = true;
          conns_.flag(slot);
        }
        break;
      case RDMA_CM_EVENT_DISCONNECTED:
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
      case RDMA_CM_EVENT_REJECTED:
      case RDMA_CM_EVENT_UNREACHABLE:
      case RDMA_CM_EVENT_CONNECT_ERROR:
        spdlog::debug("rdma: connection {} {} (status {})", slot, rdma_event_str(type), status);
        conns_.begin_drain(slot, Status::PeerReset, Status::PeerReset);
        break;
      default: break;
    }
  }
}

void RdmaConnector::on_connect_request(rdma_cm_id* id) noexcept {
  if (id->verbs != ctx_) {
    spdlog::warn("rdma: connect request on another device; rejected");
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    return;
  }
  const int slot = conns_.alloc_slot();
  if (slot < 0) {
    spdlog::warn("rdma: connect request refused: all {} connections in use", conns_.size());
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    return;
  }
  const auto s = static_cast<std::uint32_t>(slot);
  rdma_conn_param p;
  if (qps_.setup(s, id, true) != Status::Ok) {
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    return;
  }
  qps_.conn_param(p, conns_[s].qp->qp_num);
  conns_[s].state = ConnState::Accepting;
  ++conns_.accepting;
  if (rdma_accept(id, &p) != 0) {
    spdlog::warn("rdma: rdma_accept failed: {}", std::strerror(errno));
    conns_.begin_drain(s, Status::PeerReset, Status::PeerReset);
  }
}

}  // namespace ferry::transport::rdma
