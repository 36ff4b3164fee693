// 16:1 incast over rdma lanes in the Soft-RoCE VM: the receiver daemon on
// ADDR1 (rxe1), two sender daemons on ADDR0 (rxe0), 16 sender processes,
// 64 KiB / 256 KiB / 1 MiB messages (over the eager threshold: rendezvous,
// RDMA READ by the receiver). ferry-bench incast checks every message
// (checksums, exactly one Ok completion, none lost); here additionally:
// ferry's rnr_naks counter stays 0 on every daemon, and the devices' own
// RNR counters (`rdma statistic`: rcvd_rnr_err, send_rnr_err) do not move.
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

constexpr std::uint32_t kSenders = 16;
constexpr std::uint64_t kMessages = 64;  // per size, over all senders (TCG emulation is slow)

}  // namespace

TEST_CASE("16:1 incast over rdma lanes: every message delivered and checked, no RNR NAK (ferry's or the devices')") {
  DaemonFlags f;
  f.transport = "rdma";
  f.channel_conns = 2;
  f.heartbeat_ms = 200;
  f.peer_timeout_ms = 10000;  // TCG emulation is ~10x slower than a host
  f.connect_timeout_ms = 20000;
  f.hosts = {env("ADDR1"), env("ADDR0"), env("ADDR0")};
  f.extra_args = {"--rdma-ack-timeout", "18"};
  Cluster cl(3, NetMode::Loopback, f);
  const std::string sockets = cl.node(1).socket() + "," + cl.node(2).socket();
  const long long rnr0 = rnr_errors(env("RXE0")), rnr1 = rnr_errors(env("RXE1"));
  REQUIRE(rnr0 >= 0);
  REQUIRE(rnr1 >= 0);

  // Bring both channels up first with a deadline that covers rdma_cm under
  // emulation (a lost CM MAD costs seconds; a sender's open waits 10 s).
  const auto warm_deadline = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    const BenchRun w = run_bench({"incast", "--size", "4096", "--iters", "2", "--senders", "2", "--socket", sockets,
                                  "--server-socket", cl.node(0).socket(), "--target", cl.node(0).listen(), "--json"},
                                 40s);
    if (w.exit_code == 0) break;
    INFO("warm-up: " << w.stdout_text << w.stderr_tail);
    REQUIRE(std::chrono::steady_clock::now() < warm_deadline);
  }

  const BenchRun r = run_bench({"incast", "--sizes", "65536,262144,1048576", "--iters", std::to_string(kMessages),
                                "--senders", std::to_string(kSenders), "--concurrency", "2", "--socket", sockets,
                                "--server-socket", cl.node(0).socket(), "--target", cl.node(0).listen(), "--json"},
                               200s);
  // CHECK, not REQUIRE: on a failure the daemons' and the devices' counters
  // below are still read and shown (one VM run says as much as it can).
  INFO("ferry-bench exit " << r.exit_code << "\nstdout:\n" << r.stdout_text << "\nstderr:\n" << r.stderr_tail);
  INFO("receiver daemon log:\n"
       << cl.log_tail(0) << "\nsender daemon 1 log:\n"
       << cl.log_tail(1) << "\nsender daemon 2 log:\n"
       << cl.log_tail(2));
  CHECK(r.exit_code == 0);
  CHECK(r.lines.size() == 3);
  for (const auto& line : r.lines) {
    INFO("size " << uint_field(line, "size"));
    CHECK(line.find("error") == nullptr);
    CHECK(uint_field(line, "ops") == kMessages);
    CHECK(uint_field(line, "verified_ops") == kMessages);
    CHECK(uint_field(line, "rnr_naks") == 0);
  }
  for (std::size_t i = 0; i < cl.size(); ++i) {
    const auto s = json::parse(run(env("FERRYCTL") + " --control " + cl.node(i).control() + " status --json"));
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
    CHECK(cl.alive(i));
  }
  CHECK(rnr_errors(env("RXE0")) == rnr0);
  CHECK(rnr_errors(env("RXE1")) == rnr1);
}
