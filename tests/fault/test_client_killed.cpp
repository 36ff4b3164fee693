// kill -9 of one client mid-stream: a second client on the same daemon,
// calling the same service over the same channel, is unaffected (every call
// Ok and verified, before and after the kill); the server sees CallerGone
// for the victim's calls at most and keeps serving.
#include <signal.h>

#include <catch2/catch.hpp>

#include "tests/fault/fault_caller.h"
#include "tests/multihost/cluster.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("a client killed mid-stream: another client on the same channel is unaffected") {
  Cluster cl(2, net_mode_from_env());
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen());

  Gate ready, stop, victim_progress, survivor_progress, survivor_stop;
  const pid_t server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));

  fault::FaultCallerSpec victim;
  victim.socket = a.socket();
  victim.target = b.target("echo");
  victim.caller = 1;
  victim.expect_fault = false;
  victim.after_recovery = 1'000'000'000;  // runs until killed
  victim.progress = &victim_progress;
  victim.progress_after = 100;
  const pid_t victim_pid = cl.spawn_on(0, [victim] { return fault::run_fault_caller(victim); });

  fault::FaultCallerSpec survivor = victim;
  survivor.caller = 2;
  survivor.progress = &survivor_progress;
  survivor.stop = &survivor_stop;
  survivor.after_recovery = 300;
  const pid_t survivor_pid = cl.spawn_on(0, [survivor] { return fault::run_fault_caller(survivor); });
  REQUIRE(victim_progress.wait(20s));
  REQUIRE(survivor_progress.wait(20s));

  ::kill(victim_pid, SIGKILL);  // its calls are in flight right now
  CHECK(reap(victim_pid, 5s) == 128 + SIGKILL);
  survivor_stop.signal();  // 300 more verified calls after the kill
  const int rc = reap(survivor_pid, 30s);
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(rc == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
  stop.signal();
  CHECK(reap(server, 10s) == 0);  // it tolerates CallerGone, nothing else
}
