// (b) Six client processes on daemon A calling three services on daemon B
// share exactly one channel: one peer entry on each side with
// --channel-conns connections, and the kernel agrees (the TCP connections
// between the two daemon processes do not grow with the clients).
#include <catch2/catch.hpp>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"
#include "tests/multihost/proc_tcp.h"
#include "tests/multihost/roles.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("N clients on A and M services on B use exactly one channel") {
  constexpr std::uint32_t kClients = 6, kServices = 3;
  DaemonFlags flags;
  flags.channel_conns = 2;
  Cluster cl(2, net_mode_from_env(), flags);
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen());

  Gate ready, server_stop, callers_stop, progress;
  std::vector<std::string> names;
  for (std::uint32_t i = 0; i < kServices; ++i) names.push_back("s" + std::to_string(i) + "-echo");
  const pid_t server = cl.spawn_on(1, [&] { return run_echo_services(b.socket(), names, ready, server_stop); });
  REQUIRE(ready.wait(10s));
  std::vector<pid_t> callers;
  for (std::uint32_t i = 0; i < kClients; ++i) {
    CallerSpec s;
    s.socket = a.socket();
    s.target = b.target(names[i % kServices]);
    s.caller = i;
    s.count = 20;
    s.concurrency = 3;
    s.max_size = 70000;
    s.stop = &callers_stop;
    s.progress = &progress;
    s.progress_after = 20;
    callers.push_back(cl.spawn_on(0, [s] { return run_caller(s); }));
  }
  for (std::uint32_t i = 0; i < kClients; ++i) REQUIRE(progress.wait(20s));

  // All six are attached with an endpoint open and traffic flowing now.
  std::optional<StatusView> sa;
  const Error polled = poll_status(
      a.control(), 3s, [&](const StatusView& s) { return s.peers.size() == 1 && s.peers[0].endpoints == kClients; },
      &sa);
  INFO(polled.message());
  REQUIRE(sa);
  INFO("A: " << describe(*sa));
  CHECK(polled.ok());
  REQUIRE(sa->peers.size() == 1);
  const PeerView& pa = sa->peers[0];
  CHECK(pa.address == b.listen());
  CHECK(pa.channels.size() == flags.channel_conns);
  CHECK(pa.endpoints == kClients);
  for (const auto& c : pa.channels) CHECK(c.transport == "tcp");
  CHECK(pa.tx_msgs() > 0);

  StatusView sb;
  const Error read = read_status(b.control(), &sb);
  INFO(read.message());
  REQUIRE(read.ok());
  INFO("B: " << describe(sb));
  REQUIRE(sb.peers.size() == 1);
  const PeerView& pb = sb.peers[0];
  CHECK(pb.address == a.listen());  // the peer's identity is its --listen address
  CHECK(pb.channels.size() == flags.channel_conns);
  CHECK(pb.rx_msgs() > 0);

  // The kernel's view: connections between the two daemon processes are
  // the channel's (data connections, plus at most a bootstrap one), not
  // one per client.
  const std::size_t conns = connections_between(a.pid, b.pid);
  INFO("TCP connections between the daemons: " << conns);
  CHECK(conns >= flags.channel_conns);
  CHECK(conns <= flags.channel_conns + 1);

  callers_stop.signal();
  for (pid_t p : callers) CHECK(reap(p, 30s) == 0);
  server_stop.signal();
  CHECK(reap(server, 10s) == 0);
  CHECK(connections_between(a.pid, b.pid) == conns);  // clients left; the channel stays, unchanged
}
