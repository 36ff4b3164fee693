// A shard process's serving loop over either transport. Both loops hand
// each request to ShardState::handle and return when stop_fd becomes
// readable (EOF), which is how ferry-ps bench and the server command stop them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ps_transport.h"
#include "shard_state.h"

namespace ferry::ps {

struct ShardServerSpec {
  TransportKind kind = TransportKind::Ferry;
  std::string socket;  // ferry: the daemon to serve on
  std::string listen;  // tcp: HOST:PORT ("127.0.0.1:0" lets the OS pick)
  std::uint32_t max_batch = 512;
  std::uint32_t pool = 16;  // ferry: response buffers (replies in flight at once)
  bool busy_poll = false;
  int stop_fd = -1;
  // Set-up only: called once serving (info: the bound HOST:PORT for tcp), or with the reason it cannot.
  std::function<void(const std::string& info)> ready;
  std::function<void(const std::string& why)> failed;
};

// Largest request / response a shard accepts for its configuration.
std::size_t max_request_bytes(const ShardConfig& c, std::uint32_t max_batch);
std::size_t max_response_bytes(const ShardConfig& c, std::uint32_t max_batch);

// Return 0 after a clean stop, nonzero on failure (already reported).
int serve_shard_ferry(ShardState& state, const ShardServerSpec& spec);
int serve_shard_tcp(ShardState& state, const ShardServerSpec& spec);
int serve_shard(ShardState& state, const ShardServerSpec& spec);

}  // namespace ferry::ps
