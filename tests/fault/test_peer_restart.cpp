// kill -9 of the peer daemon mid-stream, then a restart on the same
// address: every call in flight to it completes exactly once with
// PeerReset, the caller re-opens (PeerUnreachable / ServiceNotFound while
// B and its server come back), and the new channel carries verified calls.
// A's view of B afterwards shows a new epoch. recovery_ms includes the
// restart of ferryd and of the server process.
#include <signal.h>

#include <catch2/catch.hpp>

#include "tests/fault/fault_caller.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {

std::uint64_t up_epoch(const Node& a, const std::string& peer, std::uint64_t not_this) {
  std::optional<StatusView> v;
  const Error polled = poll_status(
      a.control(), 10s,
      [&](const StatusView& s) {
        for (const auto& p : s.peers)
          if (p.address == peer && p.state == "Up" && p.epoch != 0 && p.epoch != not_this) return true;
        return false;
      },
      &v);
  INFO(polled.message() << (v ? "\n" + describe(*v) : ""));
  if (polled.failed()) return 0;
  for (const auto& p : v->peers)
    if (p.address == peer && p.state == "Up" && p.epoch != not_this) return p.epoch;
  return 0;
}

}  // namespace

TEST_CASE("a peer daemon killed and restarted: in-flight calls PeerReset once each, re-open reaches the new epoch") {
  DaemonFlags flags;
  flags.heartbeat_ms = 100;
  flags.peer_timeout_ms = 1000;
  flags.connect_timeout_ms = 1000;
  Cluster cl(2, net_mode_from_env(), flags);
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
  spec.failures = {Status::PeerReset};
  spec.fault = &fault;
  spec.progress = &progress;
  spec.progress_after = 100;
  spec.after_recovery = 200;
  spec.reopen_within = 25s;
  const pid_t caller = cl.spawn_on(0, [spec] { return fault::run_fault_caller(spec); });
  REQUIRE(progress.wait(20s));
  const std::uint64_t epoch1 = up_epoch(a, b.listen(), 0);
  REQUIRE(epoch1 != 0);

  fault.signal();  // just before the SIGKILL: failures after it are the kill's
  cl.restart(1);   // SIGKILL + reap, then ferryd again on B's address
  stop.signal();   // B's first server saw its daemon go
  reap(server, 5s);
  const pid_t server2 = cl.spawn_on(1, [&] { return run_rpc_server({cl.node(1).socket()}, ready2, stop2); });
  REQUIRE(ready2.wait(10s));

  const int rc = reap(caller, 45s);
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(rc == 0);
  const std::uint64_t epoch2 = up_epoch(a, b.listen(), epoch1);
  CHECK(epoch2 != 0);
  CHECK(epoch2 != epoch1);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
  stop2.signal();
  CHECK(reap(server2, 10s) == 0);
}
