// tcp frame drop: daemon A's transport silently drops its 300th data frame
// (FERRY_FAULT_TCP=drop-after=300: one Call to B never leaves A). Nothing
// below the application notices (no sequence check or retransmission yet:
// the stream stays well formed, heartbeats still flow), so that call would
// wait forever; the caller's own deadline (1.5 s) closes the endpoint, the
// call completes Cancelled exactly once, the re-opened endpoint works.
// Asserted: every call completes once (Ok with a verified echo, or that one
// Cancelled), nothing hangs, the fault really fired (A's log), recovery_ms.
#include <catch2/catch.hpp>

#include "tests/fault/fault_caller.h"
#include "tests/multihost/cluster.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("a silently dropped tcp data frame: the stuck call completes once (Cancelled) and re-open works") {
  DaemonFlags flags;
  flags.node_env = {"FERRY_FAULT_TCP=drop-after=300", ""};
  Cluster cl(2, net_mode_from_env(), flags);
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen());

  Gate ready, stop;
  const pid_t server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));

  fault::FaultCallerSpec spec;
  spec.socket = a.socket();
  spec.target = b.target("echo");
  spec.caller = 1;
  spec.failures = {Status::Cancelled};
  spec.stuck_after = 1500ms;
  spec.after_recovery = 200;
  const pid_t caller = cl.spawn_on(0, [spec] { return fault::run_fault_caller(spec); });
  const int rc = reap(caller, 40s);
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(rc == 0);
  CHECK(cl.log_tail(0, 1 << 20).find("FAULT INJECTED: drop") != std::string::npos);
  CHECK(cl.log_tail(0, 1 << 20).find("TEST-ONLY FAULT INJECTION ARMED") != std::string::npos);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
  stop.signal();
  CHECK(reap(server, 10s) == 0);
}
