// (a) Remote messaging and RPC across two daemons: senders and callers on
// daemon A, sink and servers on daemon B, every payload checked byte for
// byte (checksummed headers, mixed sizes 1 B .. 1 MiB), and the peer
// counters on both sides show the traffic went over their channel.
// FERRY_MH_NET=loopback|netns picks the network (see cluster.h).
#include <array>
#include <catch2/catch.hpp>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {
constexpr std::uint32_t kSenders = 2, kCallers = 3, kMax = 1u << 20;
constexpr std::uint64_t kMessages = 50, kCalls = 60;
}  // namespace

TEST_CASE("messages and calls cross two daemons with every byte checked") {
  Cluster cl(2, net_mode_from_env());
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen());

  Gate sink_ready, rpc_ready, rpc_stop;
  SinkSpec sink{b.socket(), "sink", kSenders, kMessages};
  const pid_t sinker = cl.spawn_on(1, [&] { return run_sink(sink, sink_ready); });
  const pid_t server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, rpc_ready, rpc_stop); });
  REQUIRE(sink_ready.wait(10s));
  REQUIRE(rpc_ready.wait(10s));

  std::vector<pid_t> clients;
  for (std::uint32_t i = 0; i < kSenders; ++i) {
    SenderSpec s{a.socket(), b.target("sink"), i, kMessages, 8};
    clients.push_back(cl.spawn_on(0, [s] { return run_sender(s); }));
  }
  for (std::uint32_t i = 0; i < kCallers; ++i) {
    CallerSpec s;
    s.socket = a.socket();
    s.target = b.target(i % 2 ? "echo" : "xform");
    s.caller = 10 + i;
    s.count = kCalls;
    s.concurrency = 4;
    s.max_size = kMax;
    clients.push_back(cl.spawn_on(0, [s] { return run_caller(s); }));
  }
  for (pid_t p : clients) CHECK(reap(p, 45s) == 0);
  CHECK(reap(sinker, 30s) == 0);

  // Both daemons count the traffic on their peer entries (one per pair of
  // engines that carries it: at most the number of engines): at least the
  // payload bytes that crossed (headers come on top), and nothing left in
  // flight once every operation has completed.
  std::uint64_t sent = 0, called = 0;
  for (std::uint64_t seq = 0; seq < kMessages; ++seq) sent += size_for(seq, kMax);
  for (std::uint64_t seq = 0; seq < kCalls; ++seq) called += size_for(seq, kMax);
  const std::uint64_t a_to_b = kSenders * sent + kCallers * called, b_to_a = kCallers * called;
  // Status is a snapshot that may trail the datapath a little: poll until
  // it holds, with a deadline.
  auto sums = [](const PeerView& p) {
    std::uint64_t tx = 0, rx = 0, inflight = 0;
    for (const auto& c : p.channels) {
      tx += c.tx_bytes;
      rx += c.rx_bytes;
      inflight += c.inflight;
    }
    return std::array<std::uint64_t, 3>{tx, rx, inflight};
  };
  auto all_sums = [&](const StatusView& v) {
    std::array<std::uint64_t, 3> t{};
    for (const PeerView& p : v.peers) {
      const auto one = sums(p);
      for (int i = 0; i < 3; ++i) t[i] += one[i];
    }
    return t;
  };
  auto peers_ok = [](const StatusView& v) { return !v.peers.empty() && v.peers.size() <= v.engines; };
  std::optional<StatusView> sa;
  const Error polled_a = poll_status(
      a.control(), 3s,
      [&](const StatusView& v) {
        if (find_peer(v, b.listen()) == nullptr || !peers_ok(v)) return false;
        const auto [tx, rx, inflight] = all_sums(v);
        return tx >= a_to_b && rx >= b_to_a && inflight == 0;
      },
      &sa);
  INFO(polled_a.message());
  REQUIRE(sa);
  INFO("A: " << describe(*sa));
  INFO("payload A->B " << a_to_b << " B->A " << b_to_a);
  REQUIRE(peers_ok(*sa));
  const PeerView* pb = find_peer(*sa, b.listen());
  REQUIRE(pb != nullptr);
  const auto [tx, rx, inflight] = all_sums(*sa);
  INFO("A counted tx_bytes " << tx << " rx_bytes " << rx << " inflight " << inflight);
  CHECK(tx >= a_to_b);
  CHECK(rx >= b_to_a);
  CHECK(inflight == 0);  // every operation completed
  CHECK(pb->tx_msgs() > 0);
  std::optional<StatusView> sb;
  const Error polled_b = poll_status(
      b.control(), 3s, [&](const StatusView& v) { return peers_ok(v) && all_sums(v)[1] >= a_to_b; }, &sb);
  INFO(polled_b.message());
  REQUIRE(sb);
  INFO("B: " << describe(*sb));
  REQUIRE(peers_ok(*sb));
  CHECK(all_sums(*sb)[1] >= a_to_b);

  rpc_stop.signal();
  CHECK(reap(server, 10s) == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}
