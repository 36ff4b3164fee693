// remote-rpc: local-rpc across two daemons. ferry-bench forks the
// bench-echo server on the daemon at --server-socket, whose --listen
// address is --target; the measuring client attaches to the daemon at
// --socket and opens "TARGET/bench-echo", so every call and response
// crosses the daemon-to-daemon channel. Both daemons' CPU is charged
// (their control sockets sit next to the client sockets).
#include "echo_rpc.h"
#include "local_rpc_server.h"
#include "scenarios.h"

namespace ferry::bench {

Outcome run_remote_rpc(ScenarioContext& ctx) {
  const BenchOptions& o = ctx.options();
  if (o.target.empty())
    return ctx.fail(Outcome::BadUsage,
                    "remote-rpc needs --target HOST:PORT (the --listen address of the daemon at --server-socket)");
  if (o.server_socket == o.socket)
    return ctx.fail(Outcome::BadUsage,
                    "remote-rpc needs --server-socket: the serving daemon, not the one at --socket (" + o.socket + ")");
  return run_echo_rpc(ctx, o.target + "/" + bench_echo_service(), "ferry-bench remote-rpc");
}

}  // namespace ferry::bench
