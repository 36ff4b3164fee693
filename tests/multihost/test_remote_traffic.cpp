// (a) Remote messaging and RPC across two daemons: senders and callers on
// daemon A, sink and servers on daemon B, every payload checked byte for
// byte (checksummed headers, mixed sizes 1 B .. 1 MiB), and the peer
// counters on both sides show the traffic went over their channel.
// FERRY_MH_NET=loopback|netns picks the network (see cluster.h).
#include <catch2/catch.hpp>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("messages and calls cross two daemons with every byte checked") {
  Cluster cl(2, net_mode_from_env());
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen());

  Gate sink_ready, rpc_ready, rpc_stop;
  SinkSpec sink{b.socket(), "sink", 2, 50};
  const pid_t sinker = cl.spawn_on(1, [&] { return run_sink(sink, sink_ready); });
  const pid_t server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, rpc_ready, rpc_stop); });
  REQUIRE(sink_ready.wait(10s));
  REQUIRE(rpc_ready.wait(10s));

  std::vector<pid_t> clients;
  for (std::uint32_t i = 0; i < 2; ++i) {
    SenderSpec s{a.socket(), b.target("sink"), i, 50, 8};
    clients.push_back(cl.spawn_on(0, [s] { return run_sender(s); }));
  }
  for (std::uint32_t i = 0; i < 3; ++i) {
    CallerSpec s;
    s.socket = a.socket();
    s.target = b.target(i % 2 ? "echo" : "xform");
    s.caller = 10 + i;
    s.count = 60;
    s.concurrency = 4;
    s.max_size = 1u << 20;
    clients.push_back(cl.spawn_on(0, [s] { return run_caller(s); }));
  }
  for (pid_t p : clients) CHECK(reap(p, 45s) == 0);
  CHECK(reap(sinker, 30s) == 0);

  // Both daemons count the traffic on their one peer entry.
  std::string err;
  const auto sa = read_status(a.control(), &err);
  INFO(err);
  REQUIRE(sa);
  INFO("A: " << describe(*sa));
  const PeerView* pb = find_peer(*sa, b.listen());
  REQUIRE(pb != nullptr);
  CHECK(pb->tx_msgs() >= 100 + 180);  // every send and call left A on this peer's channel
  CHECK(pb->rx_msgs() >= 180);        // and every response came back on it
  const auto sb = read_status(b.control(), &err);
  INFO(err);
  REQUIRE(sb);
  INFO("B: " << describe(*sb));
  REQUIRE(sb->peers.size() == 1);
  CHECK(sb->peers[0].rx_msgs() >= 100 + 180);

  rpc_stop.signal();
  CHECK(reap(server, 10s) == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}
