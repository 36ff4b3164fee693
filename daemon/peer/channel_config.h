// What the channel layer is configured with (the daemon's peer options,
// made in datapath.cpp): the ChannelManager and the pieces it owns read it.
#pragma once

#include <cstdint>
#include <string>

namespace ferry::daemon::peer {

struct ChannelConfig {
  std::uint64_t epoch = 1;  // this daemon's
  std::uint32_t heartbeat_ms = 500;
  std::uint32_t peer_timeout_ms = 3000;
  std::uint32_t connect_timeout_ms = 2000;
  std::uint32_t lanes = 1;
  std::uint32_t max_message_bytes = 1u << 20;
  std::uint16_t listen_port = 0;  // set by listen(); sent in the bootstrap Hello
  // Open channels kept at most (0: no cap); past it the idlest idle one is
  // closed by agreement with its peer (channel_lifecycle.cpp).
  std::uint32_t max_channels = 0;
  // Shared secret for peer authentication (channel_auth.cpp); empty: off.
  // Both daemons must agree: one with a secret refuses a peer without one
  // and vice versa (PermissionDenied), so a missing file fails loudly
  // instead of silently running unauthenticated.
  std::string auth_secret;
  // Receive credits (receive_pool.h). credit_floor 0: the lane transport's
  // recv_depth per connection, granted back one for one (no lending).
  // receive_pool: the pool when the lane transport has none of its own
  // (tcp: a budget); rdma's is its shared receive queue (caps().recv_pool).
  std::uint32_t receive_pool = 1024;
  std::uint32_t credit_floor = 0;
  std::uint32_t credit_share = 128;
};

}  // namespace ferry::daemon::peer
