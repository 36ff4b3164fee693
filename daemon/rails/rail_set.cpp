#include "daemon/rails/rail_set.h"

#include <infiniband/verbs.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

#include "daemon/rails/rail_config.h"
#include "ferry/mono_clock.h"
#include "transport/rdma/rdma_transport.h"

namespace ferry::daemon::rails {

using transport::Completion;
using transport::CompletionKind;
using transport::ConnId;
using transport::kInvalidConn;
using transport::MemoryHandle;
using transport::PostResult;
using transport::SendWr;

namespace {
// A port is looked at this often (one ibv_query_port each): a link that goes
// down is seen within it, well inside the failover target of 1 s.
constexpr std::uint64_t kPortCheckNs = 20'000'000;
}  // namespace

RailSet::RailSet(std::vector<std::unique_ptr<transport::rdma::RdmaTransport>> rails) : rails_(std::move(rails)) {
  if (rails_.empty() || rails_.size() > kMaxRails) throw std::runtime_error("rails: 1 to 4 rails");
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw std::runtime_error("rails: epoll_create1 failed");
  for (std::uint32_t i = 0; i < count(); ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = i;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, rails_[i]->event_fd(), &ev) != 0) {
      throw std::runtime_error("rails: cannot watch a rail's event fd");
    }
    RailInfo& r = info_[i];
    r.name = rails_[i]->device_name();
    r.address = rails_[i]->config().address;
    r.gid_index = rails_[i]->gid().index;
    conns_[i].assign(transport::rdma::kMaxConnections, kInvalidConn);
  }
}

RailSet::~RailSet() {
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

transport::TransportCaps RailSet::caps() const noexcept {
  transport::TransportCaps c = rails_[0]->caps();
  c.max_connections *= count();
  return c;
}

Result<std::uint16_t> RailSet::listen(std::string_view host, std::uint16_t port) {
  auto first = rails_[0]->listen(host, port);
  if (!first) return first;
  for (std::uint32_t i = 1; i < count(); ++i) {
    auto r = rails_[i]->listen(info_[i].address, first.value);
    if (!r) {
      spdlog::error("rail {} ({} {}): cannot listen on port {} ({})", i, info_[i].name, info_[i].address, first.value,
                    to_string(r.status));
      return r;
    }
  }
  return first;
}

Result<ConnId> RailSet::connect(std::string_view host, std::uint16_t port) {
  auto c = rails_[0]->connect(host, port);
  if (!c) return c;
  track(0, c.value, true);
  return Result<ConnId>::ok(outer(0, c.value));
}

Result<ConnId> RailSet::connect_async(std::string_view host, std::uint16_t port) {
  const std::uint32_t r = pick(0, 0);
  return connect_on(r < count() ? r : 0, host, port);
}

Result<ConnId> RailSet::connect_on(std::uint32_t rail, std::string_view host, std::uint16_t port) {
  if (!up(rail)) return Result<ConnId>::fail(Status::EndpointClosed);
  auto c = rails_[rail]->connect_async(host, port);
  if (!c) return c;
  track(rail, c.value, true);
  return Result<ConnId>::ok(outer(rail, c.value));
}

std::string RailSet::peer_address(ConnId conn) const {
  const std::uint32_t r = rail_of(conn);
  return r < count() ? rails_[r]->peer_address(inner(conn)) : std::string{};
}

Status RailSet::close(ConnId conn) {
  const std::uint32_t r = rail_of(conn);
  if (r >= count()) return Status::EndpointClosed;
  return rails_[r]->close(inner(conn));
}

Result<MemoryHandle> RailSet::register_memory(void* addr, std::size_t len) {
  MemoryHandle out;
  std::array<std::uint64_t, kMaxRails> ids{};
  for (std::uint32_t i = 0; i < count(); ++i) {
    auto h = rails_[i]->register_memory(addr, len);
    if (!h) {
      for (std::uint32_t j = 0; j < i; ++j) (void)rails_[j]->deregister_memory(MemoryHandle{.id = ids[j]});
      return h;
    }
    if (i == 0) out = h.value;
    ids[i] = h.value.id;
    out.rail_lkey[i] = h.value.lkey;
  }
  regions_.emplace_back(out.id, ids);
  return Result<MemoryHandle>::ok(out);
}

Status RailSet::deregister_memory(MemoryHandle mr) {
  auto it = std::find_if(regions_.begin(), regions_.end(), [&](const auto& e) { return e.first == mr.id; });
  if (it == regions_.end()) return Status::BadRequest;
  Status s = Status::Ok;
  for (std::uint32_t i = 0; i < count(); ++i) {
    const Status d = rails_[i]->deregister_memory(MemoryHandle{.id = it->second[i]});
    if (d != Status::Ok) s = d;
  }
  regions_.erase(it);
  return s;
}

PostResult RailSet::post_send(std::span<const SendWr> wrs) noexcept {
  PostResult total;
  std::size_t i = 0;
  while (i < wrs.size()) {
    // A run of WRs on one rail goes in one call (one doorbell per QP there).
    const std::uint32_t r = rail_of(wrs[i].conn);
    if (r >= count()) {
      total.status = Status::EndpointClosed;
      return total;
    }
    std::size_t n = 0;
    while (i + n < wrs.size() && n < batch_.size() && rail_of(wrs[i + n].conn) == r) {
      SendWr& w = batch_[n];
      w = wrs[i + n];
      w.conn = inner(w.conn);
      // The memory's key on this rail; an lkey of 0 means "copy it" (bounce).
      if (w.local.lkey != 0 && w.local.rail_lkey[r] != 0) w.local.lkey = w.local.rail_lkey[r];
      ++n;
    }
    const PostResult p = rails_[r]->post_send(std::span<const SendWr>(batch_.data(), n));
    for (std::uint32_t k = 0; k < p.accepted; ++k) info_[r].tx_bytes += batch_[k].payload_len;
    total.accepted += p.accepted;
    if (p.accepted != n) {
      total.status = p.status;
      return total;
    }
    i += n;
  }
  return total;
}

std::size_t RailSet::poll(std::span<Completion> out) noexcept {
  const std::uint64_t now = mono_ns();
  if (now >= next_port_check_ns_) {
    next_port_check_ns_ = now + kPortCheckNs;
    watch_ports(now);
  }
  std::size_t got = 0;
  const std::uint32_t first = next_poll_;
  next_poll_ = (next_poll_ + 1) % count();
  for (std::uint32_t k = 0; k < count() && got < out.size(); ++k) {
    const std::uint32_t r = (first + k) % count();
    const std::size_t n = rails_[r]->poll(out.subspan(got));
    for (std::size_t j = got; j < got + n; ++j) {
      Completion& c = out[j];
      if (c.kind == CompletionKind::Accepted || c.kind == CompletionKind::Connected) track(r, c.conn, true);
      if (c.kind == CompletionKind::Closed) track(r, c.conn, false);
      if (c.conn != kInvalidConn) c.conn = outer(r, c.conn);
    }
    got += n;
  }
  return got;
}

bool RailSet::prepare_to_sleep() noexcept {
  bool ok = true;
  for (auto& r : rails_) ok = r->prepare_to_sleep() && ok;
  return ok;
}

std::uint64_t RailSet::rnr_naks() const noexcept {
  std::uint64_t n = 0;
  for (const auto& r : rails_) n += r->rnr_naks();
  return n;
}

void RailSet::vouch(ConnId conn) noexcept {
  const std::uint32_t r = rail_of(conn);
  if (r < count()) rails_[r]->vouch(inner(conn));
}

transport::Transport::AcceptCounts RailSet::accept_counts() const noexcept {
  AcceptCounts a;
  for (const auto& r : rails_) {
    const AcceptCounts c = r->accept_counts();
    a.refused += c.refused;
    a.evicted += c.evicted;
    a.timed_out += c.timed_out;
  }
  return a;
}

void RailSet::release_owner() noexcept {
  for (auto& r : rails_) r->release_owner();
}

std::uint32_t RailSet::up_count() const noexcept {
  std::uint32_t n = 0;
  for (std::uint32_t i = 0; i < count(); ++i) n += info_[i].up ? 1 : 0;
  return n;
}

std::uint32_t RailSet::pick(std::uint32_t lane, std::uint32_t skip) const noexcept {
  std::array<bool, kMaxRails> up{};
  for (std::uint32_t i = 0; i < count(); ++i) up[i] = info_[i].up;
  return pick_rail(up, count(), lane, skip);
}

ibv_pd* RailSet::pd(std::uint32_t rail) const noexcept { return rail < count() ? rails_[rail]->pd() : nullptr; }

void RailSet::force_down(std::uint32_t i, bool down) noexcept {
  if (i >= count()) return;
  forced_down_[i] = down;
  next_port_check_ns_ = 0;  // the next poll acts on it
}

void RailSet::watch_ports(std::uint64_t now_ns) noexcept {
  for (std::uint32_t i = 0; i < count(); ++i) {
    ibv_port_attr a{};
    ibv_pd* p = rails_[i]->pd();
    const bool active =
        !forced_down_[i] && p != nullptr && ibv_query_port(p->context, 1, &a) == 0 && a.state == IBV_PORT_ACTIVE;
    RailInfo& r = info_[i];
    if (r.up && !active) {
      take_out(i, now_ns);
    } else if (!r.up && active) {
      r.up = true;
      ++r.returns;
      ++returns_total_;
      spdlog::info("rail {} ({} {}): port active again after {} ms; new lanes use it", i, r.name, r.address,
                   (now_ns - r.down_since_ns) / 1'000'000);
    }
  }
}

void RailSet::take_out(std::uint32_t rail, std::uint64_t now_ns) noexcept {
  RailInfo& r = info_[rail];
  r.up = false;
  r.down_since_ns = now_ns;
  ++r.failures;
  spdlog::warn(
      "rail {} ({} {}): port down; taking it out, closing its {} connections (their lanes rebuild on the "
      "other rails)",
      rail, r.name, r.address, r.lanes);
  // Closing completes every WR on them (Cancelled) and reports Closed: the
  // channels break those lanes and replay what the peer has not confirmed.
  for (ConnId& c : conns_[rail]) {
    if (c != kInvalidConn) (void)rails_[rail]->close(c);  // EndpointClosed: already going
  }
}

void RailSet::track(std::uint32_t rail, ConnId in, bool open) noexcept {
  auto& set = conns_[rail];
  const std::uint32_t low = in & ((1u << kRailShift) - 1);
  if (low == 0 || low > set.size()) return;  // not a connection id of this rail
  ConnId& c = set[low - 1];
  if (open) {
    if (c == kInvalidConn) ++info_[rail].lanes;
    c = in;
  } else if (c == in) {
    c = kInvalidConn;
    --info_[rail].lanes;
  }
}

}  // namespace ferry::daemon::rails
