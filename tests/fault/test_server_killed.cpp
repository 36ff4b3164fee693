// kill -9 of the serving process mid-stream: every call in flight to it
// completes exactly once with ServiceGone; the channel between the daemons
// stays up; once a new server process serves the name again, the caller's
// re-open (ServiceNotFound until then) carries verified calls.
#include <signal.h>

#include <catch2/catch.hpp>

#include "tests/fault/fault_caller.h"
#include "tests/multihost/cluster.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("a server process killed mid-stream: its callers get ServiceGone once each, a new server is reachable") {
  Cluster cl(2, net_mode_from_env());
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen());

  Gate ready, stop, progress, fault, ready2, stop2;
  const pid_t server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));

  fault::FaultCallerSpec spec;
  spec.socket = a.socket();
  spec.target = b.target("echo");
  spec.caller = 1;
  spec.failures = {Status::ServiceGone};
  spec.fault = &fault;
  spec.progress = &progress;
  spec.progress_after = 100;
  spec.after_recovery = 200;
  const pid_t caller = cl.spawn_on(0, [spec] { return fault::run_fault_caller(spec); });
  REQUIRE(progress.wait(20s));

  fault.signal();
  ::kill(server, SIGKILL);
  CHECK(reap(server, 5s) == 128 + SIGKILL);
  const pid_t server2 = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready2, stop2); });
  REQUIRE(ready2.wait(10s));

  const int rc = reap(caller, 40s);
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(rc == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
  stop2.signal();
  CHECK(reap(server2, 10s) == 0);
}
