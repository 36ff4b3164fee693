// tcp frame corruption: daemon B sends its 300th data frame (a Response to
// A) with a broken header (FERRY_FAULT_TCP=corrupt-after=300). A's decoder
// rejects it (ProtocolError) and drops that lane's connection; the lane is
// rebuilt through the bootstrap connection and B sends the Response again
// (it kept it: A had not acknowledged it). No call fails, none completes
// twice, the channel never fails. A third daemon C is unaffected: a
// bystander on A calling C sees no failure at all, before, during and after
// the fault. max_call_ms is the time traffic stood still.
#include <catch2/catch.hpp>

#include "tests/fault/fault_caller.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("a corrupted tcp frame: the lane is rebuilt, the frame goes again, every call Ok, another peer unaffected") {
  DaemonFlags flags;
  flags.node_env = {"", "FERRY_FAULT_TCP=corrupt-after=300", ""};
  Cluster cl(3, net_mode_from_env(), flags);
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  const Node& c = cl.node(2);
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen() << ", C " << c.listen());

  Gate b_ready, b_stop, c_ready, c_stop, by_progress, by_stop, done;
  const pid_t b_server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, b_ready, b_stop); });
  const pid_t c_server = cl.spawn_on(2, [&] { return run_rpc_server({c.socket()}, c_ready, c_stop); });
  REQUIRE(b_ready.wait(10s));
  REQUIRE(c_ready.wait(10s));

  fault::FaultCallerSpec by;
  by.socket = a.socket();
  by.target = c.target("echo");
  by.caller = 2;
  by.expect_fault = false;
  by.progress = &by_progress;
  by.progress_after = 20;
  by.stop = &by_stop;
  by.after_recovery = 100;
  const pid_t bystander = cl.spawn_on(0, [by] { return fault::run_fault_caller(by); });
  REQUIRE(by_progress.wait(20s));

  fault::FaultCallerSpec spec;
  spec.socket = a.socket();
  spec.target = b.target("echo");
  spec.caller = 1;
  spec.expect_fault = false;  // no call may fail: the frame goes again on the rebuilt lane
  spec.stop = &done;
  spec.after_recovery = 200;
  const pid_t caller = cl.spawn_on(0, [spec] { return fault::run_fault_caller(spec); });
  const Error rebuilt = poll_status(a.control(), 30s, [&cl](const StatusView& s) {
    // The rebuild the fault caused (not some other one before it).
    return s.counter("recoveries") >= 1 && cl.log_tail(1, 1 << 20).find("FAULT INJECTED: corrupt") != std::string::npos;
  });
  done.signal();
  const int rc = reap(caller, 40s);
  by_stop.signal();  // the bystander now makes 100 more verified calls to C
  const int by_rc = reap(bystander, 30s);
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(rebuilt.ok());
  CHECK(rc == 0);
  CHECK(by_rc == 0);
  StatusView sa, sb;
  REQUIRE(read_status(a.control(), &sa).ok());
  REQUIRE(read_status(b.control(), &sb).ok());
  CHECK(sb.counter("retransmits") >= 1);  // the corrupted Response, at least
  CHECK(sa.counter("peer_failures") == 0);
  CHECK(sb.counter("peer_failures") == 0);
  CHECK(cl.log_tail(1, 1 << 20).find("FAULT INJECTED: corrupt") != std::string::npos);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
  CHECK(cl.alive(2));
  b_stop.signal();
  c_stop.signal();
  CHECK(reap(b_server, 10s) == 0);
  CHECK(reap(c_server, 10s) == 0);
}
