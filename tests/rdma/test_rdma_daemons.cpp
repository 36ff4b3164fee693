// Two ferryd "hosts" in the Soft-RoCE VM with their channel's data lanes on
// rdma: daemon A on ADDR0 (rxe0), daemon B on ADDR1 (rxe1). 8 caller
// processes on A call 4 echo services served by one process on B and 3
// senders send one-way messages to a sink there; every payload is checked
// byte for byte (checksums, per-sender order), sizes 1 B..1 MiB so every
// rdma path runs: eager SENDs, rendezvous RDMA READs and replies by RDMA
// WRITE with immediate (counters prove each ran). Then `ferryctl status --json` must say transport rdma on
// both daemons, one peer with k RDMA lanes, rnr_naks 0; and the devices'
// own counters (`rdma statistic`) must show no RNR error either. And a
// peer with no free QP slot turns a lane away saying so.
// Exits 77 (skip) outside the VM (rdma_test_main.cpp).
#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/json.h"
#include "ferry_config.h"
#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"
#include "tests/multihost/roles.h"
#include "tests/multihost/status_json.h"
#include "tests/rdma/vm_probe.h"

using namespace ferry;
using namespace ferry::rdmatest;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {

constexpr std::uint32_t kLanes = 2, kCallers = 8, kServices = 4, kEager = 8192, kMaxCall = 256 << 10;
constexpr std::uint32_t kSenders = 3;
constexpr std::uint64_t kCalls = 40, kPerSender = 30;

// A on ADDR0, B on ADDR1, rdma lanes, with timers for TCG emulation (about
// 10x slower than a host).
DaemonFlags vm_daemons() {
  DaemonFlags f;
  f.transport = "rdma";
  f.heartbeat_ms = 200;
  f.peer_timeout_ms = 10000;
  f.connect_timeout_ms = 20000;
  f.hosts = {env("ADDR0"), env("ADDR1")};
  return f;
}

}  // namespace

TEST_CASE("8 callers on one daemon, 4 services on another: rdma lanes, every byte checked, no RNR") {
  DaemonFlags f = vm_daemons();
  f.channel_conns = kLanes;
  // Small arenas: registering them is slow under emulation, and 12 clients attach at once.
  f.extra_args = {"--rdma-ack-timeout", "18", "--eager-threshold", std::to_string(kEager),
                  "--tx-arena-bytes",   "8m", "--rx-arena-bytes",  "16m"};
  Cluster cl(2, NetMode::Loopback, f);
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("A " << a.listen() << ", B " << b.listen());

  Gate ready, stop;
  std::vector<std::string> services;
  for (std::uint32_t i = 0; i < kServices; ++i) services.push_back("svc" + std::to_string(i) + "-echo");
  const pid_t server = cl.spawn_on(1, [&] { return run_echo_services(b.socket(), services, ready, stop); });
  REQUIRE(ready.wait(20s));

  // Bring the channel up first, with a deadline that covers rdma_cm under
  // emulation (a lost CM MAD costs seconds); an open's own wait is shorter.
  const std::string first = b.target(services[0]);
  const pid_t warm = cl.spawn_on(0, [first, sock = a.socket()] {
    auto c = attach_retry(sock, "warm-up");
    if (!c) return fail(70, "warm-up: attach");
    const auto deadline = Clock::now() + 45s;
    Result<EndpointId> ep = c->open(first);
    while (!ep) {
      if (Clock::now() > deadline) return fail(71, "warm-up: open %s: %s", first.c_str(), to_string(ep.status).data());
      ep = c->open(first);
    }
    return 0;
  });
  REQUIRE(reap(warm, 50s) == 0);

  // One-way Sends of 1 B..1 MiB to a sink on B (large ones by rendezvous),
  // beside the calls: checksums and per-sender order checked by the sink.
  Gate sink_ready;
  SinkSpec sink;
  sink.socket = b.socket();
  sink.senders = kSenders;
  sink.per_sender = kPerSender;
  const pid_t sink_pid = cl.spawn_on(1, [sink, &sink_ready] { return run_sink(sink, sink_ready); });
  REQUIRE(sink_ready.wait(20s));
  std::vector<pid_t> callers;
  for (std::uint32_t i = 0; i < kCallers; ++i) {
    CallerSpec s;
    s.socket = a.socket();
    s.target = b.target(services[i % kServices]);
    s.caller = 100 + i;
    s.count = kCalls;
    s.concurrency = 4;
    // Mixed sizes 1 B..256 KiB: eager calls with the response buffer's
    // descriptor, rendezvous (RDMA READ) requests above the threshold, every
    // echo written back by RDMA WRITE with immediate.
    s.max_size = kMaxCall;
    callers.push_back(cl.spawn_on(0, [s] { return run_caller(s); }));
  }
  int failed = 0;
  for (pid_t p : callers) failed += reap(p, 90s) != 0;
  // Then the senders (attaching a dozen clients at once, each registering
  // its segment, is slow under emulation: the phases take turns).
  std::vector<pid_t> senders;
  for (std::uint32_t i = 0; i < kSenders; ++i) {
    SenderSpec s;
    s.socket = a.socket();
    s.target = b.target("sink");
    s.sender = i;  // the sink numbers senders 0..senders-1
    s.count = kPerSender;
    senders.push_back(cl.spawn_on(0, [s] { return run_sender(s); }));
  }

  for (pid_t p : senders) failed += reap(p, 60s) != 0;
  failed += reap(sink_pid, 30s) != 0;
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(failed == 0);
  stop.signal();
  CHECK(reap(server, 10s) == 0);

  // Both daemons: transport rdma, one peer entry per pair of engines that
  // carried traffic (one with a single engine), each with k lanes (QPs) all on rdma.
  for (const Node* n : {&a, &b}) {
    auto all_up = [](const StatusView& s) {
      bool up = !s.peers.empty() && s.peers.size() <= s.engines;
      for (const auto& p : s.peers) up = up && p.state == "Up";
      return up;
    };
    std::optional<StatusView> v;
    const Error polled = poll_status(n->control(), 5s, all_up, &v);
    INFO(n->listen() << ": " << polled.message() << (v ? "\n" + describe(*v) : ""));
    REQUIRE(polled.ok());
    for (const auto& p : v->peers) {
      CHECK(p.channels.size() == kLanes);
      for (const auto& ch : p.channels) CHECK(ch.transport == "rdma");
    }
    const auto s = status_json(*n);
    REQUIRE(s);
    const json::Value* t = s->find("transport");
    REQUIRE(t != nullptr);
    REQUIRE(t->as_string() != nullptr);
    CHECK(*t->as_string() == "rdma");
    const json::Value* counters = s->find("counters");
    REQUIRE(counters != nullptr);
    const json::Value* rnr = counters->find("rnr_naks");
    REQUIRE(rnr != nullptr);
    CHECK(rnr->as_uint() == std::optional<std::uint64_t>(0));
    // Every call reached B over the channel.
    const json::Value* remote = counters->find(n == &a ? "remote_calls" : "remote_delivered");
    REQUIRE(remote != nullptr);
    CHECK(remote->as_uint().value_or(0) >= kCallers * kCalls);
    // The large-message paths really ran: A posted rendezvous requests and
    // received replies by WRITE; B READ them and WROTE the replies.
    for (const char* key : n == &a ? std::array<const char*, 2>{"rendezvous_sends", "zero_copy_replies"}
                                   : std::array<const char*, 2>{"rendezvous_reads", "zero_copy_writes"}) {
      const json::Value* c = counters->find(key);
      INFO(key);
      REQUIRE(c != nullptr);
      CHECK(c->as_uint().value_or(0) > 0);
    }
    const auto count = [&](const char* key) {
      const json::Value* c = counters->find(key);
      INFO(key);
      REQUIRE(c != nullptr);
      return c->as_uint().value_or(0);
    };
    if (n == &a) {
      // Every call either exposed its response buffer with its own key (a
      // memory window, not the tx arena's) or, its response buffer being
      // small, exposed nothing and got its reply as a message
      // (rdma-eager-response-bytes): both kinds ran.
      CHECK(count("key_windows_write") + count("eager_responses") >= kCallers * kCalls);
      CHECK(count("eager_responses") > 0);
      CHECK(count("key_windows_write") > 0);
      CHECK(count("key_windows_read") > 0);  // rendezvous sources
      CHECK(count("key_windows") == count("key_windows_write") + count("key_windows_read"));
    }
    // The verbs datapath's counts are exported (datapath-stats builds):
    // doorbells carry WRs, signalled ones are a subset, polls find nothing
    // sometimes.
    if (FERRY_DATAPATH_STATS) {
      CHECK(count("rdma_post_calls") > 0);
      CHECK(count("rdma_wrs_posted") >= count("rdma_post_calls"));
      CHECK(count("rdma_wrs_signaled") <= count("rdma_wrs_posted"));
      CHECK(count("rdma_recvs") > 0);
      CHECK(count("rdma_cq_polls_empty") < count("rdma_cq_polls"));
    }
  }
  CHECK(rnr_errors(env("RXE0")) == 0);
  CHECK(rnr_errors(env("RXE1")) == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}

TEST_CASE("rdma: a call held past its timeout completes Timeout; the late reply writes nothing") {
  // The caller's response buffer is exposed to B (the reply would be an
  // RDMA WRITE into it): B answers Timeout instead and refuses the late
  // reply, so the buffer stays untouched (run_timeout_caller checks every
  // byte). Once eager with the buffer's descriptor, once by rendezvous.
  DaemonFlags f = vm_daemons();
  f.extra_args = {"--eager-threshold", std::to_string(kEager), "--tx-arena-bytes", "8m", "--rx-arena-bytes", "8m"};
  Cluster cl(2, NetMode::Loopback, f);
  for (std::uint32_t bytes : {64u, 4 * kEager}) {
    TimeoutCallerSpec spec;
    spec.timeout = 500ms;
    spec.expect_ms = 500ms;
    spec.request_bytes = bytes;
    spec.response_bytes = 4 * kEager;
    INFO("request " << bytes << " B");
    CHECK(remote_call_times_out(cl, spec) == "");
  }
  const auto s = status_json(cl.node(1));
  REQUIRE(s);
  const json::Value* counters = s->find("counters");
  REQUIRE(counters != nullptr);
  const json::Value* timeouts = counters->find("call_timeouts");
  REQUIRE(timeouts != nullptr);
  CHECK(timeouts->as_uint() == std::optional<std::uint64_t>(2));
  const auto sa = status_json(cl.node(0));
  REQUIRE(sa);
  const json::Value* rv = sa->find("counters")->find("rendezvous_sends");
  REQUIRE(rv != nullptr);
  CHECK(rv->as_uint().value_or(0) >= 1);  // the large request really went by rendezvous
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}

TEST_CASE("rdma: a peer with no free QP slot turns the lane away saying so: the Open fails Busy") {
  // B has one QP slot and two lanes a channel: it accepts A's lane 0 and
  // rejects lane 1 with the no-room reason (transport/rdma/cm_reject.h).
  // A takes B for full, not dead: its Open waits for room within its budget
  // (4 x connect-timeout-ms), then fails Busy, no peer failure counted.
  DaemonFlags f = vm_daemons();
  f.channel_conns = 2;
  f.connect_timeout_ms = 1500;  // the Open's budget: 6 s
  f.extra_args = {"--tx-arena-bytes", "8m", "--rx-arena-bytes", "8m"};
  f.node_args = {{}, {"--rdma-max-connections", "1", "--engines", "1"}};
  Cluster cl(2, NetMode::Loopback, f);
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  // B was told at start-up that no peer could open a channel to it.
  CHECK(cl.log_has(1, "rdma-max-connections 1 keeps 0 slots", 5s));
  Gate ready, stop;
  const pid_t server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready, stop); });
  REQUIRE(ready.wait(60s));
  const pid_t opener =
      cl.spawn_on(0, [&] { return open_expect_busy(a.socket(), "rdma-peer-full", b.target("echo"), 60s, 4000ms); });
  const int rc = reap(opener, 120s);
  INFO("A log:\n" << cl.log_tail(0, 6000) << "\nB log:\n" << cl.log_tail(1, 4000));
  CHECK(rc == 0);
  const auto sa = status_json(a);
  REQUIRE(sa);
  CHECK(counter(*sa, "peer_full_refusals") >= 1);
  CHECK(counter(*sa, "peer_failures") == 0);
  CHECK(cl.log_tail(0, 64 * 1024).find("turned our lane connection away: no free rdma-max-connections slot there") !=
        std::string::npos);
  stop.signal();
  CHECK(reap(server, 30s) == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}
