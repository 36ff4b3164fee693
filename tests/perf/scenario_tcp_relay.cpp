// tcp-relay-rpc: kernel TCP in ferry's process shape. A remote ferry call
// crosses four processes (client -> daemon A -> daemon B -> server and
// back); tcp-rpc crosses two. This baseline puts a relay process where each
// daemon sits: client -> (Unix socket) relay A -> (TCP, --target) relay B
// -> (Unix socket) echo server, blocking I/O everywhere, each relay
// forwarding one framed message at a time. Against tcp-rpc in the same run
// it prices the two extra process hops of the shape on the machine at hand,
// with no ferry code in the path (docs/rdma-latency.md).
//
// `ferry-bench tcp-relay-server --listen HOST:PORT` is relay B: per
// accepted connection a process that forks its echo server on a socketpair.
// Without --target, ferry-bench forks one on --listen itself.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "forked_server.h"
#include "framed_io.h"
#include "framed_rpc.h"
#include "scenarios.h"
#include "tcp_servers.h"
#include "tcp_socket.h"

namespace ferry::bench {

namespace {

// One framed message from `from` to `to`; false at EOF or on an error.
bool forward(int from, int to, std::vector<std::byte>& buf) {
  std::uint32_t len = 0;
  if (!read_frame_header(from, &len)) return false;
  if (len > buf.size()) buf.resize(len);  // grows once per new size, never per message
  return read_exact(from, buf.data(), len) && write_frame(to, buf.data(), len);
}

// Requests from `client_side` go to `server_side`, each answer back, until
// the client side closes. 0 at that EOF, 1 when the server side fails.
int relay(int client_side, int server_side) {
  std::vector<std::byte> buf;
  while (forward(client_side, server_side, buf)) {
    if (!forward(server_side, client_side, buf)) return 1;
  }
  return 0;
}

// Relay B for one accepted connection: its echo server on a socketpair.
int serve_relayed(int tcp_fd) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 1;
  const pid_t server = ::fork();
  if (server < 0) return 1;
  if (server == 0) {
    ::close(tcp_fd);
    ::close(sv[0]);
    ::_exit(serve_framed_echo(sv[1]));
  }
  ::close(sv[1]);
  const int rc = relay(tcp_fd, sv[0]);
  ::close(sv[0]);  // the echo server sees EOF and exits
  return rc;
}

}  // namespace

Outcome run_tcp_relay_rpc(ScenarioContext& ctx) {
  const BenchOptions& o = ctx.options();
  if (o.concurrency != 1) {
    return ctx.fail(Outcome::BadUsage,
                    "tcp-relay-rpc is a one-call-at-a-time blocking baseline: --concurrency must be 1");
  }
  std::string target = o.target;
  ForkedServer relay_b;  // only without --target: relay B and its echo server, here
  if (!target.empty()) {
    ctx.server_not_charged();
  } else {
    if (const Error e = fork_tcp_server(relay_b, o.listen, serve_relayed, &target); e.failed())
      return ctx.fail(Outcome::Failed, "tcp-relay-rpc relay B: " + e.message());
    ctx.cpu().add_process(relay_b.pid());
  }

  // Relay A: our side's "daemon", between this process and the TCP connection.
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return ctx.fail(Outcome::Failed, std::string("socketpair: ") + std::strerror(errno));
  ForkedServer relay_a;
  Error error = relay_a.start([&](ReadyNotifier& ready) {
    ::close(sv[0]);
    int tcp_fd = -1;
    if (const Error e = tcp_connect(target, &tcp_fd); e.failed()) {
      ready.failed(e.message());
      return 1;
    }
    ready.ready();
    const int rc = relay(sv[1], tcp_fd);
    ::close(tcp_fd);
    return rc;
  });
  ::close(sv[1]);
  if (error.ok()) error = relay_a.wait_ready(std::chrono::seconds(10), nullptr);
  if (error.failed()) {
    ::close(sv[0]);
    return ctx.fail(Outcome::Failed, "tcp-relay-rpc relay A: " + error.message());
  }
  ctx.cpu().add_process(relay_a.pid());

  Outcome outcome = run_framed_rpc(sv[0], ctx);
  ::close(sv[0]);  // relay A sees EOF, closes its TCP connection: relay B and its server follow
  for (ForkedServer* p : {&relay_a, &relay_b}) {
    if (p->pid() <= 0) continue;
    const int rc = p->stop(std::chrono::seconds(5));
    if (outcome == Outcome::Ok && rc != 0)
      outcome = ctx.fail(Outcome::Failed, "tcp-relay-rpc relay exited with " + std::to_string(rc));
  }
  return outcome;
}

int run_tcp_relay_server(const BenchOptions& options) {
  return serve_tcp_forever(options, "tcp-relay-server", serve_relayed);
}

}  // namespace ferry::bench
