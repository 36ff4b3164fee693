// A hub daemon on the tcp transport with more than 64 peer connections:
// 24 spoke daemons each open a channel of 1 + 4 connections to it (120 at
// the hub, past the 64 the tcp transport once held), and every spoke's
// caller completes its calls to a service on the hub. All connections come
// from 127.0.0.1, so the hub allows more of them unauthenticated at once
// than the default 16 per source (the opens race). The spokes keep the
// default peer-max-connections.
#include <catch2/catch.hpp>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"
#include "tests/multihost/proc_tcp.h"
#include "tests/multihost/roles.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("a tcp hub holds 24 channels of 5 connections each (120 > 64)") {
  constexpr std::size_t kSpokes = 24;
  DaemonFlags flags;
  flags.channel_conns = 4;
  flags.heartbeat_ms = 200;
  flags.peer_timeout_ms = 5000;  // 25 daemons on a few shared cores
  flags.connect_timeout_ms = 5000;
  // The default 64 connections would not do: 128 (x credit-floor 4 = 512
  // of the 1,024 receive credits reserved, the rest to share).
  flags.node_args = {{"--peer-max-connections", "128", "--peer-max-unauthenticated-per-source", "128"}};
  Cluster cl(1 + kSpokes, net_mode_from_env(), flags);
  INFO("mode " << to_string(cl.mode()));

  Gate ready, server_stop, go;
  const std::string hub_sock = cl.node(0).socket();
  const pid_t server = cl.spawn_on(0, [&, hub_sock] {
    return run_echo_services(hub_sock, std::vector<std::string>{"hub-echo"}, ready, server_stop);
  });
  REQUIRE(ready.wait(10s));
  std::vector<pid_t> callers;
  for (std::size_t i = 1; i <= kSpokes; ++i) {
    CallerSpec s;
    s.socket = cl.node(i).socket();
    s.target = cl.node(0).target("hub-echo");
    s.caller = static_cast<std::uint32_t>(i);
    s.count = 8;
    s.concurrency = 2;
    s.max_size = 20000;
    callers.push_back(cl.spawn_on(i, [s, &go]() -> int {
      if (!go.wait(30s)) return fail(90, "no go");
      return run_caller(s);
    }));
  }
  for (std::size_t k = 0; k < callers.size(); ++k) go.signal();
  for (std::size_t k = 0; k < callers.size(); ++k) {
    INFO("spoke " << k + 1 << " log:\n" << cl.log_tail(k + 1));
    CHECK(reap(callers[k], 60s) == 0);
  }

  std::optional<StatusView> s;
  const Error polled = poll_status(
      cl.node(0).control(), 10s,
      [&](const StatusView& v) {
        if (v.peers.size() != kSpokes) return false;
        for (const auto& p : v.peers)
          if (p.channels.size() != flags.channel_conns) return false;
        return true;
      },
      &s);
  INFO(polled.message() << "\nhub log:\n" << cl.log_tail(0));
  REQUIRE(s);
  INFO("hub: " << describe(*s));
  CHECK(polled.ok());
  std::size_t conns = 0;
  for (std::size_t i = 1; i <= kSpokes; ++i) {
    const PeerView* p = find_peer(*s, cl.node(i).listen());
    INFO("spoke " << cl.node(i).listen());
    CHECK(p != nullptr);
    if (p != nullptr) CHECK(p->state == "Up");
    conns += connections_between(cl.node(0).pid, cl.node(i).pid);
  }
  // The kernel's view: a bootstrap and 4 lanes per spoke.
  CHECK(conns >= kSpokes * (1 + flags.channel_conns));
  CHECK(s->counter("peer_failures") == 0);
  server_stop.signal();
  CHECK(reap(server, 10s) == 0);
}
