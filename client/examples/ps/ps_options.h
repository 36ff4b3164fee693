// ferry-ps command line (boost.program_options): one struct for every
// subcommand, parsed in one place. Exceptions stay inside parse_options.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ps_workload.h"

namespace ferry::ps::tool {

enum class Command : std::uint8_t { Server, Worker, Bench, Check };
std::string_view to_string(Command c) noexcept;

struct PsOptions {
  Command command = Command::Bench;
  TransportKind transport = TransportKind::Ferry;
  Workload workload;  // shards, keys, dim, batch, skew, dense, seed
  std::uint32_t workers = 2;
  std::uint32_t iters = 1000;
  std::uint32_t warmup = 20;  // bench only; check runs none
  double lr = 0.125;          // a power of two keeps check exact (ps_model.h)
  std::string socket;         // workers' daemon (default $FERRY_SOCKET or /run/ferry/ferryd.sock)
  std::string server_socket;  // shards' daemon (default: --socket)
  std::string target;         // ferry: shards' daemon HOST:PORT; tcp: host the shards listen on
  std::string listen;         // server --transport tcp: HOST:PORT
  std::uint32_t shard_index = 0;
  std::uint32_t worker_id = 0;
  std::vector<std::string> shard_addresses;  // worker --transport tcp
  bool json = false;
  bool busy_poll = false;
  std::uint32_t shard_pool = 0;   // ferry shards' response buffers; 0: 2 x workers + 4 (bench/check), 64 (server)
  std::uint32_t reattach_s = 60;  // server: seconds to attach again after ferryd went away (0: exit at once)
  std::string latency_dump;
  // bench: offered ops/s over all workers (open loop, Poisson arrivals per
  // worker; latency from each op's intended start); 0: closed loop.
  double rate = 0;
  std::string worker_netns;  // bench/check: run workers / shards inside these network namespaces
  std::string shard_netns;
  // Test-only fault: worker 0 skips its push at this iteration, so check must fail.
  std::uint32_t fault_skip_push = UINT32_MAX;
};

// Parses argv; returns -1 to go on, or the exit code (usage printed).
int parse_options(int argc, char** argv, PsOptions* o);

}  // namespace ferry::ps::tool
