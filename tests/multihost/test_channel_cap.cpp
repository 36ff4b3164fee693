// Channels on demand: a daemon with --max-channels 2 whose clients call
// services on four other daemons, two callers at a time, each opening an
// endpoint, making its calls and closing it again. Past the cap the daemon
// closes its idlest channel with nothing in flight through the Close
// exchange, and the next Open to that peer opens a new channel. Every call
// completes exactly once with the right reply (run_caller checks each one
// and fails on a stray completion), no daemon counts a peer failure (the
// eviction is orderly on both sides), and the counters show channels
// opened, evicted and re-opened with the cap held at the end.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"
#include "tests/multihost/roles.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("past --max-channels the idlest idle channel is evicted and re-opened on demand") {
  constexpr std::size_t kNodes = 5;  // node 0 calls nodes 1..4
  constexpr std::size_t kCap = 2;
  constexpr int kRounds = 3;
  DaemonFlags flags;
  flags.channel_conns = 1;
  // Five daemons and their clients on a CI machine's cores: a peer timeout
  // of a few seconds, so that a starved engine is not taken for a dead peer
  // (the test asserts no peer failure and no timeout).
  flags.peer_timeout_ms = 5000;
  flags.extra_args = {"--max-channels", std::to_string(kCap)};
  Cluster cl(kNodes, net_mode_from_env(), flags);
  INFO("mode " << to_string(cl.mode()));

  Gate ready, server_stop;
  std::vector<pid_t> servers;
  for (std::size_t i = 1; i < kNodes; ++i) {
    const std::string sock = cl.node(i).socket();
    const std::vector<std::string> names{"cap" + std::to_string(i) + "-echo"};
    servers.push_back(cl.spawn_on(i, [&, sock, names] { return run_echo_services(sock, names, ready, server_stop); }));
  }
  for (std::size_t i = 1; i < kNodes; ++i) REQUIRE(ready.wait(10s));

  // Two callers on node 0, each visiting the four peers in turn (offset by
  // two, so one channel carries traffic while another is being evicted).
  std::vector<pid_t> callers;
  for (std::size_t k = 0; k < 2; ++k) {
    std::vector<CallerSpec> plan;
    for (int r = 0; r < kRounds; ++r) {
      for (std::size_t j = 0; j < kNodes - 1; ++j) {
        const std::size_t peer = 1 + (j + 2 * k) % (kNodes - 1);
        CallerSpec s;
        s.socket = cl.node(0).socket();
        s.target = cl.node(peer).target("cap" + std::to_string(peer) + "-echo");
        s.caller = static_cast<std::uint32_t>(100 * k + plan.size());
        s.count = 20;
        s.concurrency = 4;
        s.max_size = 4000;
        plan.push_back(s);
      }
    }
    callers.push_back(cl.spawn_on(0, [plan]() -> int {
      for (const CallerSpec& s : plan) {
        if (const int rc = run_caller(s); rc != 0) return rc;
        // Long enough for a tick to see the channel idle and over the cap.
        std::this_thread::sleep_for(150ms);
      }
      return 0;
    }));
  }
  for (pid_t p : callers) CHECK(reap(p, 60s) == 0);

  std::optional<StatusView> s;
  const Error polled = poll_status(
      cl.node(0).control(), 5s, [&](const StatusView& v) { return v.peers.size() <= kCap; }, &s);
  INFO(polled.message());
  REQUIRE(s);
  INFO("daemon 0: " << describe(*s));
  CHECK(polled.ok());
  CHECK(s->peers.size() <= kCap);
  std::printf("cap %zu: %zu channels open at the end; opened %llu, evicted %llu, re-opened %llu\n", kCap,
              s->peers.size(), static_cast<unsigned long long>(s->counter("channels_opened")),
              static_cast<unsigned long long>(s->counter("channels_evicted")),
              static_cast<unsigned long long>(s->counter("channels_reopened")));
  CHECK(s->counter("channels_opened") >= kNodes - 1);
  CHECK(s->counter("channels_evicted") >= 2);
  CHECK(s->counter("channels_reopened") >= 1);
  CHECK(s->counter("peer_failures") == 0);
  // `ferryctl channels` ends its table with the same churn.
  {
    const std::string cmd = std::string(std::getenv("FERRYCTL")) + " --control " + cl.node(0).control() + " channels";
    FILE* f = ::popen(cmd.c_str(), "r");
    REQUIRE(f != nullptr);
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
    CHECK(::pclose(f) == 0);
    INFO(out);
    CHECK(out.find("channels: opened " + std::to_string(s->counter("channels_opened"))) != std::string::npos);
    CHECK(out.find(", evicted ") != std::string::npos);
    CHECK(out.find(", re-opened ") != std::string::npos);
  }
  for (std::size_t i = 1; i < kNodes; ++i) {
    StatusView p;
    const Error read = read_status(cl.node(i).control(), &p);
    INFO(read.message());
    REQUIRE(read.ok());
    INFO("daemon " << i << ": " << describe(p));
    CHECK(p.counter("peer_failures") == 0);
    CHECK(p.counter("timeouts") == 0);
  }
  server_stop.signal();
  for (pid_t p : servers) CHECK(reap(p, 10s) == 0);
}
