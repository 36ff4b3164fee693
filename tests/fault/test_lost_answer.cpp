// A call the serving daemon loses: daemon B forgets its 100th remote Call
// (FERRY_FAULT_ENGINE=forget-call-after=100: received and acknowledged on
// its lane, never delivered, timed nor answered, as a daemon with a bug
// would lose it). Nothing below the application can repair that; only the
// calling daemon's answer backstop (the call's timeout + 2 x peer-timeout-ms
// + 1 s, Deadlines::backstop in daemon/loop/deadlines.h) notices. A fails the channel then (the
// one way to be sure B will not still touch the caller's buffers): the lost
// call completes Timeout, the calls in flight beside it PeerReset, each
// exactly once; the caller re-opens and 100 more calls verify. Calls carry a
// 1 s timeout (--call-timeout-ms 1000), so the backstop fires ~5 s after the
// lost call.
#include <catch2/catch.hpp>

#include "tests/fault/fault_caller.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("a call the serving daemon lost: the caller's backstop fails the channel, every call completes once") {
  DaemonFlags flags;
  flags.node_env = {"", "FERRY_FAULT_ENGINE=forget-call-after=100"};
  flags.extra_args = {"--call-timeout-ms", "1000"};
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
  spec.expect_fault = true;
  spec.failures = {Status::Timeout, Status::PeerReset};
  spec.after_recovery = 100;
  const pid_t caller = cl.spawn_on(0, [spec] { return fault::run_fault_caller(spec); });
  const int rc = reap(caller, 40s);
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(rc == 0);

  const std::string a_log = cl.log_tail(0, 1 << 20);
  const std::string b_log = cl.log_tail(1, 1 << 20);
  CHECK(b_log.find("TEST-ONLY FAULT INJECTION ARMED") != std::string::npos);
  CHECK(b_log.find("FAULT INJECTED: remote Call #100") != std::string::npos);
  CHECK(a_log.find("the peer never answered call") != std::string::npos);
  StatusView sa;
  REQUIRE(read_status(a.control(), &sa).ok());
  CHECK(sa.counter("peer_failures") >= 1);  // the backstop failed the channel
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
  stop.signal();
  CHECK(reap(server, 10s) == 0);
}
