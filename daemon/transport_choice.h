// Resolving --transport and creating the transport that carries the data
// lanes of channels. The bootstrap connection of every channel stays on a
// TcpTransport whatever is chosen; with rdma the k data lanes per peer are
// RC QPs of one RdmaTransport (one PD, CQ and set of receive slabs,
// registered once here at start-up).
//
// auto: rdma when ferryd was built with rdma support and RdmaTransport::create
// succeeds for --device / the --listen address (a device exists, its port
// has the address's RoCE v2 GID); tcp otherwise. The reason is logged.
#pragma once

#include <memory>
#include <string>

#include "daemon/config.h"
#include "transport/transport.h"

namespace ferry::daemon {

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
};

// Start-up only. For rdma, the transport is created on this thread; the caller
// hands ownership to the engine thread (RdmaTransport::release_owner).
DataTransport make_data_transport(const Config& config);

// Largest payload a data lane carries in one message: the eager threshold on
// rdma (larger ones are NotSupported until rendezvous/zero-copy land),
// max-message-bytes on tcp.
std::uint32_t lane_max_message(const Config& config, const transport::Transport* data) noexcept;

}  // namespace ferry::daemon
