// (c) Four daemons in a full mesh: every daemon calls a service on every
// other one, all starting at once (so both sides of a pair dial at the
// same moment), and each pair ends up with exactly one channel: n-1 peer
// entries per daemon, --channel-conns connections each, and the kernel
// shows the same number of connections between every pair.
#include <catch2/catch.hpp>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"
#include "tests/multihost/proc_tcp.h"
#include "tests/multihost/roles.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("a full mesh of four daemons has exactly one channel per pair") {
  constexpr std::size_t kNodes = 4;
  DaemonFlags flags;
  flags.channel_conns = 2;
  Cluster cl(kNodes, net_mode_from_env(), flags);
  INFO("mode " << to_string(cl.mode()));

  Gate ready, server_stop, go;
  std::vector<pid_t> servers, callers;
  for (std::size_t i = 0; i < kNodes; ++i) {
    const std::string sock = cl.node(i).socket();
    const std::vector<std::string> names{"m" + std::to_string(i) + "-echo"};
    servers.push_back(cl.spawn_on(i, [&, sock, names] { return run_echo_services(sock, names, ready, server_stop); }));
  }
  for (std::size_t i = 0; i < kNodes; ++i) REQUIRE(ready.wait(10s));
  for (std::size_t i = 0; i < kNodes; ++i) {
    for (std::size_t j = 0; j < kNodes; ++j) {
      if (i == j) continue;
      CallerSpec s;
      s.socket = cl.node(i).socket();
      s.target = cl.node(j).target("m" + std::to_string(j) + "-echo");
      s.caller = static_cast<std::uint32_t>(i * kNodes + j);
      s.count = 15;
      s.concurrency = 2;
      s.max_size = 20000;
      // Each caller attaches, then waits for `go` so the opens race.
      callers.push_back(cl.spawn_on(i, [s, &go]() -> int {
        if (!go.wait(20s)) return fail(90, "no go");
        return run_caller(s);
      }));
    }
  }
  for (std::size_t k = 0; k < callers.size(); ++k) go.signal();
  for (pid_t p : callers) CHECK(reap(p, 40s) == 0);

  for (std::size_t i = 0; i < kNodes; ++i) {
    // A duplicate from simultaneous dials may take a moment to be dropped.
    std::optional<StatusView> s;
    const Error polled = poll_status(
        cl.node(i).control(), 3s,
        [&](const StatusView& v) {
          if (v.peers.size() != kNodes - 1) return false;
          for (const auto& p : v.peers)
            if (p.channels.size() != flags.channel_conns) return false;
          return true;
        },
        &s);
    INFO(polled.message());
    REQUIRE(s);
    INFO("daemon " << i << " (" << cl.node(i).listen() << "): " << describe(*s));
    CHECK(polled.ok());
    for (std::size_t j = 0; j < kNodes; ++j) {
      if (j == i) continue;
      const PeerView* p = find_peer(*s, cl.node(j).listen());
      INFO("peer " << cl.node(j).listen());
      CHECK(p != nullptr);
      if (p) CHECK(p->channels.size() == flags.channel_conns);
    }
  }
  // Kernel view: the same connection count between every pair.
  std::size_t first = 0;
  for (std::size_t i = 0; i < kNodes; ++i) {
    for (std::size_t j = i + 1; j < kNodes; ++j) {
      const std::size_t n = connections_between(cl.node(i).pid, cl.node(j).pid);
      INFO("daemons " << i << " and " << j << ": " << n << " TCP connections");
      CHECK(n >= flags.channel_conns);
      CHECK(n <= flags.channel_conns + 1);
      if (first == 0) first = n;
      CHECK(n == first);
    }
  }
  server_stop.signal();
  for (pid_t p : servers) CHECK(reap(p, 10s) == 0);
}
