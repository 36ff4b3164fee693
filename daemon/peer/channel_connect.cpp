// Non-blocking TCP connects of channels: the bootstrap connection and tcp
// data lanes. The engine thread owns every transport, so a connect that
// waited for the peer's SYN-ACK would stall all traffic (local and to every
// other peer) for up to connect_timeout_ms whenever one peer is unreachable.
// Instead the socket connects in the background; poll() asks each pending
// socket for its outcome without waiting (pending connects are few: one per
// channel being set up), and the channel's deadline bounds the wait.
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "daemon/peer/channel_manager.h"
#include "transport/tcp/tcp_transport.h"

namespace ferry::daemon::peer {

bool ChannelManager::start_connect(Channel& ch, std::int32_t lane, std::uint64_t now_ns) {
  const bool on_lanes = lane >= 0;
  auto* tcp = dynamic_cast<transport::tcp::TcpTransport*>(&via(on_lanes));
  if (tcp == nullptr) {
    // Not tcp (rdma_cm lanes): that transport's connect_async when it has
    // one (a Connected or Closed completion follows, drain()), else its
    // blocking connect, bounded by its own connect timeout.
    auto conn = via(on_lanes).connect_async(ch.host, ch.port);
    if (conn) {
      if (on_lanes) ch.lanes[static_cast<std::uint32_t>(lane)].conn = conn.value;
      conns_[key(conn.value, on_lanes)] = ConnRef{ch.id, lane};
      return true;
    }
    if (conn.status == Status::NotSupported) conn = via(on_lanes).connect(ch.host, ch.port);
    if (!conn) {
      if (on_lanes) return lane_connect_failed(ch, static_cast<std::uint32_t>(lane), now_ns);
      fail(ch, Status::PeerUnreachable, now_ns);
      return false;
    }
    connected(ch, lane, conn.value, now_ns);
    return true;
  }
  auto fd = tcp->connect_start(ch.host, ch.port);
  if (fd && connect_epoll_ >= 0) {
    epoll_event ev{};
    ev.events = EPOLLOUT;  // also reports EPOLLERR/EPOLLHUP: refused, unreachable
    ev.data.fd = fd.value;
    if (epoll_ctl(connect_epoll_, EPOLL_CTL_ADD, fd.value, &ev) != 0) {  // out of epoll watches
      ::close(fd.value);
      fd = Result<int>::fail(Status::NoMemory);
    }
  }
  if (!fd) {
    spdlog::warn("channel {} to {}: connect failed ({})", ch.id, ch.address, to_string(fd.status));
    if (on_lanes) {
      return lane_connect_failed(ch, static_cast<std::uint32_t>(lane), now_ns);
    } else {
      // Nothing was reported up to anyone yet: the caller gets the status.
      bump(counters_.peer_failures);
      if (auto it = by_address_.find(ch.address); it != by_address_.end() && it->second == ch.id) by_address_.erase(it);
      ch.state = ChannelState::Failed;
      finished_.push_back(ch.id);
    }
    return false;
  }
  PendingConnect p;
  p.fd = fd.value;
  p.channel = ch.id;
  p.lane = lane;
  p.deadline_ns = now_ns + std::uint64_t{cfg_.connect_timeout_ms} * 1'000'000;
  if (pending_.empty() || p.deadline_ns < next_connect_deadline_ns_) next_connect_deadline_ns_ = p.deadline_ns;
  pending_.push_back(p);
  return true;
}

void ChannelManager::unwatch(int fd) noexcept {
  if (connect_epoll_ >= 0) epoll_ctl(connect_epoll_, EPOLL_CTL_DEL, fd, nullptr);
}

std::size_t ChannelManager::poll_connects(std::uint64_t now_ns) {
  // One epoll_wait per turn says whether any pending socket finished; the
  // per-socket scan runs only then or when a deadline passed.
  if (connect_epoll_ >= 0 && now_ns < next_connect_deadline_ns_) {
    epoll_event evs[8];
    if (epoll_wait(connect_epoll_, evs, 8, 0) <= 0) return 0;
  }
  std::size_t work = 0;
  // Index loop: connected()/fail() may start more connects (lanes) or drop
  // this channel's others, both of which change pending_.
  for (std::size_t i = 0; i < pending_.size();) {
    const PendingConnect p = pending_[i];
    const int err = transport::tcp::TcpTransport::connect_result(p.fd);
    if (err == EINPROGRESS && now_ns < p.deadline_ns) {
      ++i;
      continue;
    }
    unwatch(p.fd);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    ++work;
    Channel* ch = find(p.channel);
    if (ch == nullptr || ch->finished()) {
      ::close(p.fd);
      continue;
    }
    const bool on_lanes = p.lane >= 0;
    if (err != 0) {
      ::close(p.fd);
      spdlog::warn("channel {} to {}: {} connect failed ({})", ch->id, ch->address, on_lanes ? "lane" : "bootstrap",
                   err == EINPROGRESS ? "no answer within the connect timeout" : std::strerror(err));
      if (on_lanes) {
        lane_connect_failed(*ch, static_cast<std::uint32_t>(p.lane), now_ns);
      } else {
        fail(*ch, Status::PeerUnreachable, now_ns);
      }
      continue;
    }
    auto* tcp = static_cast<transport::tcp::TcpTransport*>(&via(on_lanes));  // only tcp connects are pending
    auto conn = tcp->adopt(p.fd);
    if (!conn) {
      if (on_lanes) {
        lane_connect_failed(*ch, static_cast<std::uint32_t>(p.lane), now_ns);
      } else {
        fail(*ch, Status::PeerUnreachable, now_ns);
      }
      continue;
    }
    connected(*ch, p.lane, conn.value, now_ns);
  }
  next_connect_deadline_ns_ = ~std::uint64_t{0};
  for (const PendingConnect& p : pending_)
    next_connect_deadline_ns_ = std::min(next_connect_deadline_ns_, p.deadline_ns);
  return work;
}

void ChannelManager::connected(Channel& ch, std::int32_t lane, transport::ConnId conn, std::uint64_t now_ns) {
  if (lane < 0) {
    ch.bootstrap = conn;
    conns_[key(conn, false)] = ConnRef{ch.id, -1};
    set_state(ch, ChannelState::Handshaking, now_ns);
    send_hello(ch, conn, 0, false, Status::Ok, false);
    return;
  }
  const auto i = static_cast<std::uint32_t>(lane);
  ch.lanes[i].conn = conn;
  conns_[key(conn, true)] = ConnRef{ch.id, lane};
  send_hello(ch, conn, i + 1, false, Status::Ok, true);
}

bool ChannelManager::lane_connect_failed(Channel& ch, std::uint32_t lane, std::uint64_t now_ns) {
  Lane& l = ch.lanes[lane];
  if (l.conn != transport::kInvalidConn) conns_.erase(key(l.conn, true));
  l.conn = transport::kInvalidConn;
  if (ch.usable() && l.broken) {
    spdlog::info("channel {} ({}) lane {}: connect for the rebuild failed; dialling again in {} ms", ch.id, ch.address,
                 lane, kLaneRedialNs / 1'000'000);
    // Rebuilding: dial again shortly, within the rebuild budget (rebuild_tick).
    l.redial_ns = now_ns + kLaneRedialNs;
    return false;
  }
  fail(ch, Status::PeerUnreachable, now_ns);
  return false;
}

void ChannelManager::on_connected(const transport::Completion& c, bool on_lanes, std::uint64_t now_ns) {
  auto it = conns_.find(key(c.conn, on_lanes));
  Channel* ch = it == conns_.end() ? nullptr : find(it->second.channel);
  if (ch == nullptr || ch->finished()) {
    if (it != conns_.end()) conns_.erase(it);
    via(on_lanes).close(c.conn);  // nobody waits for it any more
    return;
  }
  connected(*ch, it->second.lane, c.conn, now_ns);
}

void ChannelManager::drop_connects(std::uint32_t channel) noexcept {
  for (std::size_t i = 0; i < pending_.size();) {
    if (pending_[i].channel == channel) {
      unwatch(pending_[i].fd);
      ::close(pending_[i].fd);
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

}  // namespace ferry::daemon::peer
