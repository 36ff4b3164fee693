// uds-rpc: the same-host kernel baseline. Request/response ping-pong of
// length-prefixed messages over a Unix-domain stream socket (a
// socketpair: the same kernel path as a connected named socket) between
// ferry-bench and a server process it forks; blocking I/O.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "forked_server.h"
#include "framed_rpc.h"
#include "scenarios.h"

namespace ferry::bench {

Outcome run_uds_rpc(ScenarioContext& ctx) {
  if (ctx.options().concurrency != 1)
    return ctx.fail(Outcome::BadUsage, "uds-rpc is a one-call-at-a-time blocking baseline: --concurrency must be 1");
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return ctx.fail(Outcome::Failed, std::string("socketpair: ") + std::strerror(errno));

  ForkedServer server;
  Error error = server.start([&](ReadyNotifier& ready) {
    ::close(sv[0]);
    ready.ready();
    return serve_framed_echo(sv[1]);
  });
  ::close(sv[1]);
  if (error.ok()) error = server.wait_ready(std::chrono::seconds(10), nullptr);
  if (error.failed()) {
    ::close(sv[0]);
    return ctx.fail(Outcome::Failed, "uds-rpc server: " + error.message());
  }
  ctx.cpu().add_process(server.pid());

  Outcome outcome = run_framed_rpc(sv[0], ctx);
  ::close(sv[0]);  // the server sees EOF and exits
  const int rc = server.stop(std::chrono::seconds(5));
  if (outcome == Outcome::Ok && rc != 0)
    outcome = ctx.fail(Outcome::Failed, "uds-rpc server exited with " + std::to_string(rc));
  return outcome;
}

}  // namespace ferry::bench
