// Entry points of the scenarios, one file each; the table that names them
// is scenario_table.cpp.
#pragma once

#include "scenario.h"

namespace ferry::bench {

Outcome run_uds_rpc(ScenarioContext& ctx);
Outcome run_tcp_rpc(ScenarioContext& ctx);
Outcome run_tcp_relay_rpc(ScenarioContext& ctx);
Outcome run_shm_pingpong(ScenarioContext& ctx);
Outcome run_ipc_echo(ScenarioContext& ctx);
Outcome run_local_rpc(ScenarioContext& ctx);
Outcome run_remote_rpc(ScenarioContext& ctx);
Outcome run_incast(ScenarioContext& ctx);

// `ferry-bench tcp-server --listen HOST:PORT`: the tcp-rpc server as a
// standalone process (for --target runs). Serves until killed.
int run_tcp_server(const BenchOptions& options);
// `ferry-bench tcp-relay-server --listen HOST:PORT`: relay B of tcp-relay-rpc
// (scenario_tcp_relay.cpp) with an echo server per connection, until killed.
int run_tcp_relay_server(const BenchOptions& options);

}  // namespace ferry::bench
