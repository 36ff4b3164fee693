// 16:1 incast over tcp lanes: 16 sender processes spread over 4 sender
// daemons send 64 KiB, 256 KiB and 1 MiB messages to one service on a fifth
// daemon, with the send windows at their defaults and with every window off.
// ferry-bench incast fails on any lost, corrupt, duplicate or twice-completed
// message and on a status the flow-control design does not define; here the
// run must also have every message verified at the receiver and completed Ok
// exactly once, and no RNR NAK counted by any daemon. FERRY_MH_NET=netns runs
// each daemon in its own network namespace (198.18.2.x, routes checked).
#include <catch2/catch.hpp>

#include "tests/flow/bench_run.h"
#include "tests/multihost/cluster.h"

using namespace ferry;
using namespace ferry::flowtest;
using namespace ferry::mhtest;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kSenderDaemons = 4;
constexpr std::uint32_t kSenders = 16;
constexpr std::uint64_t kMessages = 320;  // per size, over all senders: 20 each

void run_incast(const std::vector<std::string>& extra) {
  DaemonFlags f;
  f.extra_args = extra;
  f.peer_timeout_ms = 5000;  // 21 processes on a small machine: no false peer deaths
  Cluster cl(1 + kSenderDaemons, net_mode_from_env(), f);
  std::string sockets;
  for (std::size_t i = 1; i <= kSenderDaemons; ++i) sockets += (i > 1 ? "," : "") + cl.node(i).socket();
  const BenchRun r = run_bench({"incast", "--sizes", "65536,262144,1048576", "--iters", std::to_string(kMessages),
                                "--senders", std::to_string(kSenders), "--concurrency", "4", "--socket", sockets,
                                "--server-socket", cl.node(0).socket(), "--target", cl.node(0).listen(), "--json"},
                               50s);
  INFO("ferry-bench exit " << r.exit_code << "\nstdout:\n"
                           << r.stdout_text << "\nstderr:\n"
                           << r.stderr_tail << "\nreceiver daemon log:\n"
                           << cl.log_tail(0));
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.lines.size() == 3);
  for (const auto& line : r.lines) {
    INFO(line.find("size")->as_uint().value_or(0) << " bytes");
    CHECK(uint_field(line, "ops") == kMessages);
    CHECK(uint_field(line, "verified_ops") == kMessages);
    CHECK(uint_field(line, "senders") == kSenders);
    CHECK(uint_field(line, "sender_daemons") == kSenderDaemons);
    // Warm-up messages included: every one reached the receiver and passed its checks.
    CHECK(uint_field(line, "delivered") == kMessages + kSenders * uint_field(line, "warmup_per_sender"));
    CHECK(line.find("counters_read")->as_bool() == std::optional<bool>(true));
    CHECK(uint_field(line, "rnr_naks") == 0);
    CHECK(number(line, "p50_us").value_or(0) > 0);
    CHECK(number(line, "p50_us") <= number(line, "p99_us"));
    CHECK(number(line, "p99_us") <= number(line, "p999_us"));
    CHECK(number(line, "bytes_per_s").value_or(0) > 0);
  }
  for (std::size_t i = 0; i < cl.size(); ++i) CHECK(cl.alive(i));
}

}  // namespace

TEST_CASE("16:1 incast over tcp, send windows at their defaults: every message delivered and checked, no RNR") {
  run_incast({});
}

TEST_CASE("16:1 incast over tcp, every send window off: every message delivered and checked, no RNR") {
  run_incast(windows_off_args());
}
