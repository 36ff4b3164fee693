// tcp-rpc: the kernel-TCP baseline, as a typical RPC stack runs it: one
// TCP connection per process pair, TCP_NODELAY, blocking I/O,
// length-prefixed messages. ferry-bench forks its server on --listen
// (default 127.0.0.1:0), or connects to --target where
// `ferry-bench tcp-server --listen HOST:PORT` runs (then the server's
// CPU is not charged: it is another host's, or at least not our child).
#include <unistd.h>

#include "forked_server.h"
#include "framed_rpc.h"
#include "scenarios.h"
#include "tcp_servers.h"
#include "tcp_socket.h"

namespace ferry::bench {

Outcome run_tcp_rpc(ScenarioContext& ctx) {
  const BenchOptions& o = ctx.options();
  if (o.concurrency != 1)
    return ctx.fail(Outcome::BadUsage, "tcp-rpc is a one-call-at-a-time blocking baseline: --concurrency must be 1");

  ForkedServer server;
  std::string target = o.target;
  if (!target.empty()) {
    ctx.server_not_charged();
  } else {
    if (const Error e = fork_tcp_server(server, o.listen, serve_framed_echo, &target); e.failed())
      return ctx.fail(Outcome::Failed, "tcp-rpc server: " + e.message());
    ctx.cpu().add_process(server.pid());
  }

  int fd = -1;
  if (const Error e = tcp_connect(target, &fd); e.failed()) return ctx.fail(Outcome::Failed, "tcp-rpc: " + e.message());
  Outcome outcome = run_framed_rpc(fd, ctx);
  ::close(fd);
  if (server.pid() > 0) {
    const int rc = server.stop(std::chrono::seconds(5));
    if (outcome == Outcome::Ok && rc != 0)
      outcome = ctx.fail(Outcome::Failed, "tcp-rpc server exited with " + std::to_string(rc));
  }
  return outcome;
}

int run_tcp_server(const BenchOptions& options) { return serve_tcp_forever(options, "tcp-server", serve_framed_echo); }

}  // namespace ferry::bench
