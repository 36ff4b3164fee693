// Several NICs per host: a RailSet is the lane transport of a daemon with
// more than one rail (a rail = one RdmaTransport = device + local address +
// source GID). It composes the rails behind the one Transport interface the
// channels use, so the lane machinery (credits, rings, replay) is the same
// whatever the rail count:
//   - a ConnId names its rail in bits 14-15 (rail_of()); the rest is the
//     rail's own id (slot + 1 is far below 2^14);
//   - listen() listens on every rail's address at the same port;
//   - connect_on() dials from a chosen rail (the channel picks it, lane i on
//     rail i mod the rails that are up, docs/rails.md);
//   - post_send() rewrites each WR's conn and local key for its rail
//     (MemoryHandle::rail_lkey: client segments are registered on every
//     rail's PD), allocation-free;
//   - poll() drains every rail, starting at a rotating one (fairness), and
//     watches each rail's port: a rail whose port goes down is taken out
//     (its connections are closed, so their lanes break and rebuild on the
//     rails left, replaying what the peer had not confirmed) and comes back
//     when its port is active again.
// Engine thread only (like the rails it owns), except the const accessors.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/transport.h"

struct ibv_pd;

namespace ferry::transport::rdma {
class RdmaTransport;
struct RdmaStats;
}  // namespace ferry::transport::rdma

namespace ferry::daemon::rails {

inline constexpr std::uint32_t kMaxRails = transport::kMaxRails;
inline constexpr unsigned kRailShift = 14;

// What status JSON shows of a rail (engine thread writes, snapshots copy).
struct RailInfo {
  std::string name;     // device, e.g. rxe0
  std::string address;  // local IPv4 address
  int gid_index = -1;
  bool up = true;
  std::uint32_t lanes = 0;     // connections open on it now
  std::uint64_t tx_bytes = 0;  // payload bytes of WRs posted on it
  std::uint64_t failures = 0;  // times it was taken out (port down)
  std::uint64_t returns = 0;   // times it came back
  std::uint64_t down_since_ns = 0;
};

class RailSet final : public transport::Transport {
 public:
  // Takes the rails (at least one; rail 0 is the one of the --listen
  // address). Start-up only; throws std::runtime_error when the epoll set
  // cannot be made.
  explicit RailSet(std::vector<std::unique_ptr<transport::rdma::RdmaTransport>> rails);
  ~RailSet() override;

  static std::uint32_t rail_of(transport::ConnId c) noexcept { return (c >> kRailShift) & (kMaxRails - 1); }

  transport::TransportCaps caps() const noexcept override;
  int event_fd() const noexcept override { return epoll_fd_; }

  [[nodiscard]] Result<std::uint16_t> listen(std::string_view host, std::uint16_t port) override;
  [[nodiscard]] Result<transport::ConnId> connect(std::string_view host, std::uint16_t port) override;
  [[nodiscard]] Result<transport::ConnId> connect_async(std::string_view host, std::uint16_t port) override;
  // connect_async from rail `rail` (must be up: EndpointClosed otherwise).
  [[nodiscard]] Result<transport::ConnId> connect_on(std::uint32_t rail, std::string_view host, std::uint16_t port);
  std::string peer_address(transport::ConnId conn) const override;
  [[nodiscard]] Status close(transport::ConnId conn) override;
  [[nodiscard]] Result<transport::MemoryHandle> register_memory(void* addr, std::size_t len) override;
  [[nodiscard]] Status deregister_memory(transport::MemoryHandle mr) override;

  [[nodiscard]] transport::PostResult post_send(std::span<const transport::SendWr> wrs) noexcept override;
  std::size_t poll(std::span<transport::Completion> out) noexcept override;
  bool prepare_to_sleep() noexcept override;
  std::uint64_t rnr_naks() const noexcept override;
  void vouch(transport::ConnId conn) noexcept override;
  AcceptCounts accept_counts() const noexcept override;
  void release_owner() noexcept override;

  std::uint32_t count() const noexcept { return static_cast<std::uint32_t>(rails_.size()); }
  bool up(std::uint32_t rail) const noexcept { return rail < count() && info_[rail].up; }
  std::uint32_t up_count() const noexcept;
  // Times any rail came back (a channel whose lanes left one moves them home).
  std::uint64_t returns_total() const noexcept { return returns_total_; }
  // The rail a lane dials from: lane i on the i-th rail that is up (after
  // `skip` failed tries, the next ones), so lanes spread and a rail that is
  // down gets none. count() when no rail is up.
  std::uint32_t pick(std::uint32_t lane, std::uint32_t skip) const noexcept;
  const RailInfo& info(std::uint32_t rail) const noexcept { return info_[rail]; }
  ibv_pd* pd(std::uint32_t rail) const noexcept;
  transport::rdma::RdmaTransport& rail(std::uint32_t i) noexcept { return *rails_[i]; }
  // Test hook (the fault switch, engine_fault.cpp): take rail `i` out or
  // back in as if its port changed state.
  void force_down(std::uint32_t i, bool down) noexcept;

 private:
  static transport::ConnId outer(std::uint32_t rail, transport::ConnId inner) noexcept {
    return inner | (rail << kRailShift);
  }
  static transport::ConnId inner(transport::ConnId c) noexcept { return c & ~((kMaxRails - 1) << kRailShift); }
  void watch_ports(std::uint64_t now_ns) noexcept;
  void take_out(std::uint32_t rail, std::uint64_t now_ns) noexcept;
  void track(std::uint32_t rail, transport::ConnId inner, bool open) noexcept;

  std::vector<std::unique_ptr<transport::rdma::RdmaTransport>> rails_;
  std::array<RailInfo, kMaxRails> info_{};
  std::array<bool, kMaxRails> forced_down_{};
  // Open connections per rail (inner ids) by slot (an inner id's low 14
  // bits are slot + 1), so a rail taken out closes them: one entry for each
  // connection slot a rail has (rdma kMaxConnections).
  std::array<std::vector<transport::ConnId>, kMaxRails> conns_{};
  int epoll_fd_ = -1;
  std::uint32_t next_poll_ = 0;
  std::uint64_t returns_total_ = 0;
  std::uint64_t next_port_check_ns_ = 0;
  std::array<transport::SendWr, transport::kPostBatch> batch_{};
  // register_memory: per-rail ids of a region, by rail 0's id (control path).
  std::vector<std::pair<std::uint64_t, std::array<std::uint64_t, kMaxRails>>> regions_;
};

}  // namespace ferry::daemon::rails
