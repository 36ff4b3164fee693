// Resolving --transport and creating the transport that carries the data
// lanes of channels. The bootstrap connection of every channel stays on a
// TcpTransport whatever is chosen; with rdma the k data lanes per peer are
// RC QPs of one RdmaTransport (one PD, CQ and set of receive slabs,
// registered once here at start-up).
//
// With --device naming several devices (or "all"), the lanes run on a
// rails::RailSet: one RdmaTransport per rail, each with its own PD, and
// client segments are registered on every rail's PD (docs/rails.md).
//
// auto: rdma when ferryd was built with rdma support and RdmaTransport::create
// succeeds for --device / the --listen address (a device exists, its port
// has the address's RoCE v2 GID); tcp otherwise. The reason is logged.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/counters.h"
#include "daemon/rails/rail_facts.h"
#include "daemon/remote/remote_keys.h"
#include "transport/transport.h"

struct ibv_pd;

namespace ferry::transport::rdma {
struct RdmaStats;
}

namespace ferry::daemon {

namespace rails {
class RailSet;
}

struct TransportChoice {
  std::string name;    // "rdma" or "tcp"
  std::string reason;  // one line for the log
};

// The cheap, allocation-free guess (sysfs only) used before the engine exists.
TransportChoice choose_transport(const Config& config);

struct DataTransport {
  std::unique_ptr<transport::Transport> transport;  // null: lanes share the bootstrap (tcp) transport
  TransportChoice choice;
  std::string error;  // non-empty: --transport rdma was asked for and cannot be had (start-up fails)
  // rdma: the protection domain client segments are registered on at
  // attach, and the source GID index memory windows bind with.
  ibv_pd* pd = nullptr;
  int gid_index = -1;
  bool software_rdma = false;                              // rxe or siw: the NIC is kernel code on our CPUs
  const transport::rdma::RdmaStats* rdma_stats = nullptr;  // the rdma transport's datapath counters
  rails::RailSet* rails = nullptr;                         // several rails: `transport` is this RailSet
};

// Start-up only. For rdma, the transport is created on this thread; the caller
// hands ownership to the engine thread (RdmaTransport::release_owner).
DataTransport make_data_transport(const Config& config);

// Every transport of the engine's channels, made at start-up: the
// bootstrap connections' (tcp, always) and the data lanes' (null when the
// lanes run on the bootstrap transport too), with what the daemon needs to
// know of them. The engine thread owns them from run() on.
struct Transports {
  std::unique_ptr<transport::Transport> bootstrap;
  std::unique_ptr<transport::Transport> lanes;
  std::string name;                    // what carries the lanes: "rdma" or "tcp" (status JSON)
  std::uint32_t lane_max_message = 0;  // largest Send/Call/Response payload over a lane
  ibv_pd* pd = nullptr;                // rdma: segments are registered on it at attach (rail 0's)
  // Several rails: the lane transport as a RailSet, and every rail's PD
  // (pds[0] == pd): segments are registered on each.
  rails::RailSet* rails = nullptr;
  std::array<ibv_pd*, transport::kMaxRails> pds{};
  std::vector<RailFacts> rail_facts;  // rdma: one per rail (one for a single rdma transport)
  bool software_rdma = false;         // lanes on rxe or siw (engine-spin-hold auto)
  // The rdma lanes' datapath counters (engine thread only), for status.
  const transport::rdma::RdmaStats* rdma_stats = nullptr;
  RemoteKeys keys;  // keys peers get to client memory (closed before the segments' MRs go)

  transport::Transport& lane_transport() noexcept { return lanes ? *lanes : *bootstrap; }
  // Lanes that can RDMA READ and WRITE with immediate: response buffers and rendezvous.
  bool remote_access() const noexcept;
  // Start-up only: hands both to the thread that calls them from now on.
  void release_owner() noexcept;
};

// Start-up only; throws std::runtime_error when a transport asked for
// cannot be had.
void make_transports(const Config& config, Transports& out);

// Copies the rdma lanes' datapath counters into `counters` (engine thread).
void publish_rdma_stats(const Transports& t, Counters& counters) noexcept;

// Largest payload a data lane carries in one message: the eager threshold on
// rdma (larger ones go by rendezvous: the peer RDMA-READs them),
// max-message-bytes on tcp.
std::uint32_t lane_max_message(const Config& config, const transport::Transport* data) noexcept;

}  // namespace ferry::daemon
