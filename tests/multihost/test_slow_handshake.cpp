// An Open rides out a slow peer handshake: B is stopped
// (SIGSTOP) while A opens B's service, so B's kernel accepts A's dials but
// nobody answers the Hello, and the handshake misses connect-timeout-ms
// (1000 ms here). B resumes 1.8 s later. The Open (its own timeout 10 s)
// must succeed once B answers, and a call over it verify; before, it
// failed PeerUnreachable at the first missed deadline although the daemon
// dialled again 100 ms later. A dead port still fails fast (test errors).
#include <signal.h>

#include <catch2/catch.hpp>
#include <thread>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("slow handshake: an Open waits out a peer that misses connect-timeout-ms, then succeeds") {
  DaemonFlags flags;
  flags.connect_timeout_ms = 1000;
  Cluster cl(2, NetMode::Loopback, flags);
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  Gate ready, stop, opening;
  const pid_t server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));

  REQUIRE(stop_process(b.pid, 5s));  // every thread of B stopped before A dials
  const pid_t client = cl.spawn_on(0, [&]() -> int {
    auto c = attach_retry(a.socket(), "slow");
    if (!c) return fail(1, "attach");
    opening.signal();
    const auto t0 = Clock::now();
    auto ep = c->open(b.target("echo"), 10s);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    if (!ep) return fail(2, "open after %lld ms: %s", static_cast<long long>(took), to_string(ep.status).data());
    if (took < 1000) return fail(3, "open done after %lld ms, while B was stopped", static_cast<long long>(took));
    if (const Status st = echo_checked(*c, ep.value, 1500, 9, 1); st != Status::Ok)
      return fail(4, "echo: %s", to_string(st).data());
    return 0;
  });
  REQUIRE(opening.wait(10s));
  // B resumes only once A's first handshake has failed (connect-timeout-ms
  // after A dialled, however late the client's Open came) and moved the Open.
  const bool moved = cl.log_has(0, "1 opens kept for a redial", 15s);
  INFO("A log before B resumed:\n" << cl.log_tail(0, 6000));
  REQUIRE(moved);
  REQUIRE(::kill(b.pid, SIGCONT) == 0);
  const int rc = reap(client, 30s);
  INFO("A log:\n" << cl.log_tail(0, 6000));
  CHECK(rc == 0);
  CHECK(cl.log_tail(0, 64 * 1024).find("1 opens kept for a redial") != std::string::npos);
  stop.signal();
  CHECK(reap(server, 10s) == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}
