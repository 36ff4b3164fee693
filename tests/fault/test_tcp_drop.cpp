// tcp frame drop: daemon A's transport silently drops its 300th data frame
// (FERRY_FAULT_TCP=drop-after=300: one Call to B never leaves A, though A's
// transport reports it sent). The stream stays well formed and heartbeats
// flow, so only ferry's own lane sequence numbers can tell: B sees the next
// frame's lane_seq skip one (or, if nothing follows, A's retransmission
// timeout fires), the lane is rebuilt through the bootstrap connection and
// the lost Call goes again. Asserted: every call completes exactly once, Ok,
// with a verified echo (the caller allows no failure at all); the channel
// never failed; A retransmitted and both sides count a recovery; the fault
// really fired. max_call_ms is the time traffic stood still.
#include <catch2/catch.hpp>

#include <cstdio>
#include <sstream>

#include "tests/fault/fault_caller.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("a silently dropped tcp data frame goes again on a rebuilt lane: every call Ok, exactly once") {
  DaemonFlags flags;
  flags.node_env = {"FERRY_FAULT_TCP=drop-after=300", ""};
  Cluster cl(2, net_mode_from_env(), flags);
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen());

  Gate ready, stop, done;
  const pid_t server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));

  fault::FaultCallerSpec spec;
  spec.socket = a.socket();
  spec.target = b.target("echo");
  spec.caller = 1;
  spec.expect_fault = false;  // no call may fail: the loss is repaired below the application
  spec.stop = &done;
  spec.after_recovery = 200;
  const pid_t caller = cl.spawn_on(0, [spec] { return fault::run_fault_caller(spec); });

  const Error rebuilt = poll_status(a.control(), 30s, [&cl](const StatusView& s) {
    // The rebuild the fault caused (not some other one before it).
    return s.counter("recoveries") >= 1 && cl.log_tail(0, 1 << 20).find("FAULT INJECTED: drop") != std::string::npos;
  });
  done.signal();  // 200 more verified calls over the rebuilt lane
  const int rc = reap(caller, 40s);
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1) << "\n" << rebuilt.message());
  CHECK(rebuilt.ok());
  CHECK(rc == 0);
  StatusView sa, sb;
  REQUIRE(read_status(a.control(), &sa).ok());
  REQUIRE(read_status(b.control(), &sb).ok());
  CHECK(sa.counter("retransmits") >= 1);
  CHECK(sa.counter("recoveries") >= 1);
  CHECK(sb.counter("recoveries") >= 1);
  CHECK(sa.counter("peer_failures") == 0);  // the channel itself never failed
  CHECK(sb.counter("peer_failures") == 0);
  // What each daemon saw and did (printed: the recovery, step by step).
  for (int n : {0, 1}) {
    std::istringstream log(cl.log_tail(n, 1 << 20));
    for (std::string line; std::getline(log, line);)
      if (line.find("lane") != std::string::npos && line.find("channel") != std::string::npos)
        std::printf("%c: %s\n", n == 0 ? 'A' : 'B', line.c_str());
  }
  CHECK(cl.log_tail(0, 1 << 20).find("FAULT INJECTED: drop") != std::string::npos);
  CHECK(cl.log_tail(0, 1 << 20).find("TEST-ONLY FAULT INJECTION ARMED") != std::string::npos);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
  stop.signal();
  CHECK(reap(server, 10s) == 0);
}
