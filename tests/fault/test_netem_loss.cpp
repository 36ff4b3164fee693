// 5 % packet loss (tc netem) on both veths between two namespaces: TCP
// retransmits below ferry, so every call completes Ok with a verified
// echo, no channel fails (peer timeout 3 s against 200 ms minimum RTOs),
// and a bystander between the same daemons in the other direction is
// likewise unaffected. Netns only; exits 77 (skip) with the reason when
// the kernel has no sch_netem (modprobe sch_netem) or tc is missing.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fault/fault_caller.h"
#include "tests/multihost/cluster.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {

int sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

// Why netem cannot be used here, or empty: tries it in a scratch namespace.
std::string netem_unavailable() {
  if (sh("command -v tc >/dev/null 2>&1") != 0) return "tc (iproute2) not installed";
  sh("modprobe sch_netem >/dev/null 2>&1");  // may be built in, or missing: the probe decides
  const std::string ns = "ferry-netem-probe-" + std::to_string(::getpid());
  if (sh("ip netns add " + ns + " >/dev/null 2>&1") != 0) return "cannot create a network namespace";
  const int rc = sh("ip netns exec " + ns + " tc qdisc add dev lo root netem loss 5% >/dev/null 2>&1");
  sh("ip netns del " + ns + " >/dev/null 2>&1");
  return rc == 0 ? "" : "the kernel has no sch_netem qdisc (modprobe sch_netem failed)";
}

}  // namespace

TEST_CASE("5 % loss on the veths: every call completes Ok and verified, no channel fails") {
  // Skips before anything exists that an early exit would leak.
  std::string why;
  if (const Error no_lab = NetnsLab::available(); no_lab.failed()) why = "network namespaces: " + no_lab.message();
  if (why.empty()) why = netem_unavailable();
  if (!why.empty()) {
    std::printf("SKIP: netem loss test: %s\n", why.c_str());
    std::fflush(stdout);
    std::_Exit(77);
  }
  DaemonFlags flags;
  flags.peer_timeout_ms = 3000;
  Cluster cl(2, NetMode::Netns, flags);
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  for (const Node* n : {&a, &b})
    REQUIRE(sh("ip netns exec " + n->ns + " tc qdisc add dev fv0 root netem loss 5%") == 0);

  Gate b_ready, b_stop, a_ready, a_stop;
  const pid_t b_server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, b_ready, b_stop); });
  const pid_t a_server = cl.spawn_on(0, [&] { return run_rpc_server({a.socket()}, a_ready, a_stop); });
  REQUIRE(b_ready.wait(10s));
  REQUIRE(a_ready.wait(10s));

  fault::FaultCallerSpec spec;
  spec.socket = a.socket();
  spec.target = b.target("echo");
  spec.caller = 1;
  spec.expect_fault = false;
  spec.after_recovery = 1500;
  fault::FaultCallerSpec back = spec;  // the other direction, B -> A
  back.socket = b.socket();
  back.target = a.target("echo");
  back.caller = 2;
  back.after_recovery = 500;
  const pid_t caller = cl.spawn_on(0, [spec] { return fault::run_fault_caller(spec); });
  const pid_t bystander = cl.spawn_on(1, [back] { return fault::run_fault_caller(back); });
  const int rc = reap(caller, 50s);
  const int by_rc = reap(bystander, 20s);
  std::string qdisc;
  if (FILE* p = ::popen(("ip netns exec " + a.ns + " tc -s qdisc show dev fv0").c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) qdisc += buf;
    ::pclose(p);
  }
  std::printf("netem on A's veth:\n%s", qdisc.c_str());
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(rc == 0);
  CHECK(by_rc == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
  b_stop.signal();
  a_stop.signal();
  CHECK(reap(b_server, 10s) == 0);
  CHECK(reap(a_server, 10s) == 0);
}
