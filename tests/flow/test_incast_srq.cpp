// Many-peer incast onto one shared receive queue, in the Soft-RoCE VM: 7
// sender daemons on ADDR0 (rxe0, distinct ports), one receiver daemon on
// ADDR1 (rxe1) whose receive pool is tiny (48 receives for 14 lanes: a floor
// of 2 reserved for each of its 16 connections, 16 to borrow, a share of 8),
// so receive credits bind all the time. rnr_retry is 0 on every QP: a SEND
// that met an empty SRQ would fail its QP loudly (rnr_retry_exceeded).
// Checked: ferry-bench incast delivers and verifies every message exactly
// once; rnr_naks stays 0 on every daemon and the devices' RNR counters do
// not move; lanes did borrow from the pool and never beyond it; senders
// waited for credits; and the receiver's registered receive memory is the
// pool (48 slots) with one peer and with seven.
// Exits 77 (skip) outside the VM (rdma_test_main.cpp).
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>

#include "base/json.h"
#include "tests/flow/bench_run.h"
#include "tests/multihost/cluster.h"
#include "tests/rdma/vm_probe.h"

using namespace ferry;
using namespace ferry::rdmatest;
using namespace ferry::flowtest;
using namespace ferry::mhtest;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kSenderDaemons = 7;
constexpr std::uint32_t kSenders = 14;    // processes, two per sender daemon
constexpr std::uint64_t kMessages = 112;  // per size, over all senders
constexpr std::uint64_t kPool = 48;
constexpr std::uint64_t kShared = kPool - 16 * 2;  // 16 rdma connections x floor 2
constexpr std::uint64_t kSlotBytes = 8256;         // 48 + 8192 (eager-threshold), 64-byte aligned

std::uint64_t counter(const Cluster& cl, std::size_t i, const char* name) {
  const auto s = json::parse(run(env("FERRYCTL") + " --control " + cl.node(i).control() + " status --json"));
  REQUIRE(s);
  const json::Value* counters = s->find("counters");
  REQUIRE(counters != nullptr);
  const json::Value* v = counters->find(name);
  INFO("counter " << name);
  REQUIRE(v != nullptr);
  REQUIRE(v->as_uint());
  return *v->as_uint();
}

BenchRun warm(const Cluster& cl, const std::string& sockets, std::uint32_t senders) {
  // rdma_cm under emulation: a lost CM MAD costs seconds; retry until up.
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  for (;;) {
    BenchRun w = run_bench(
        {"incast", "--size", "4096", "--iters", std::to_string(senders), "--senders", std::to_string(senders),
         "--socket", sockets, "--server-socket", cl.node(0).socket(), "--target", cl.node(0).listen(), "--json"},
        40s);
    if (w.exit_code == 0) return w;
    INFO("warm-up: " << w.stdout_text << w.stderr_tail);
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
}

}  // namespace

TEST_CASE("7:1 daemon incast onto a 48-receive shared queue: every message once, no RNR, memory = the pool") {
  DaemonFlags f;
  f.transport = "rdma";
  f.channel_conns = 2;
  f.heartbeat_ms = 200;
  f.peer_timeout_ms = 10000;  // TCG emulation is ~10x slower than a host
  f.connect_timeout_ms = 20000;
  f.hosts = {env("ADDR1")};
  for (std::size_t i = 0; i < kSenderDaemons; ++i) f.hosts.push_back(env("ADDR0"));
  f.extra_args = {"--rdma-ack-timeout", "18"};
  f.node_args = {{"--receive-pool", std::to_string(kPool), "--credit-floor", "2", "--credit-share", "8",
                  "--rdma-max-connections", "16"}};
  for (std::size_t i = 0; i < kSenderDaemons; ++i) f.node_args.push_back({"--receive-pool", "256"});
  Cluster cl(1 + kSenderDaemons, NetMode::Loopback, f);
  const long long rnr0 = rnr_errors(env("RXE0")), rnr1 = rnr_errors(env("RXE1"));
  REQUIRE(rnr0 >= 0);
  REQUIRE(rnr1 >= 0);

  // One peer first: the receiver's registered receive memory is the pool.
  (void)warm(cl, cl.node(1).socket(), 1);
  CHECK(counter(cl, 0, "receive_pool") == kPool);
  CHECK(counter(cl, 0, "rdma_recv_registered_bytes") == kPool * kSlotBytes);

  std::string sockets;
  for (std::size_t i = 1; i <= kSenderDaemons; ++i) sockets += (i > 1 ? "," : "") + cl.node(i).socket();
  (void)warm(cl, sockets, kSenderDaemons);

  // Eager sizes use a receive per message; 64 KiB goes by rendezvous (one
  // receive for the request, the payload by RDMA READ).
  const BenchRun r = run_bench({"incast", "--sizes", "1024,8192,65536", "--iters", std::to_string(kMessages),
                                "--senders", std::to_string(kSenders), "--concurrency", "4", "--socket", sockets,
                                "--server-socket", cl.node(0).socket(), "--target", cl.node(0).listen(), "--json"},
                               240s);
  INFO("ferry-bench exit " << r.exit_code << "\nstdout:\n" << r.stdout_text << "\nstderr:\n" << r.stderr_tail);
  INFO("receiver daemon log:\n" << cl.log_tail(0) << "\nsender daemon 1 log:\n" << cl.log_tail(1));
  CHECK(r.exit_code == 0);
  CHECK(r.lines.size() == 3);
  for (const auto& line : r.lines) {
    INFO("size " << uint_field(line, "size"));
    CHECK(line.find("error") == nullptr);
    CHECK(uint_field(line, "ops") == kMessages);
    CHECK(uint_field(line, "verified_ops") == kMessages);
    CHECK(uint_field(line, "rnr_naks") == 0);
  }
  // Seven peers, fourteen lanes: the same registered receive memory.
  CHECK(counter(cl, 0, "receive_pool") == kPool);
  CHECK(counter(cl, 0, "rdma_recv_registered_bytes") == kPool * kSlotBytes);
  // The lanes borrowed (credits were asked for beyond the floors), never
  // beyond what the pool has to lend.
  const std::uint64_t borrowed_max = counter(cl, 0, "receive_pool_borrowed_max");
  CHECK(borrowed_max > 0);
  CHECK(borrowed_max <= kShared);
  std::uint64_t stalls = 0;
  for (std::size_t i = 0; i < cl.size(); ++i) {
    INFO("daemon " << i);
    CHECK(counter(cl, i, "rnr_naks") == 0);
    if (i > 0) stalls += counter(cl, i, "credit_stalls");
    CHECK(cl.alive(i));
  }
  CHECK(stalls > 0);  // the credits did bind
  CHECK(rnr_errors(env("RXE0")) == rnr0);
  CHECK(rnr_errors(env("RXE1")) == rnr1);
}
