// Remote back-pressure keeps every message and its order: daemon B gives
// its clients small rx arenas (2 MiB) and no staging area, so messages of
// up to 1 MiB from three senders on daemon A keep finding the sink full.
// B refuses them Busy and, until the refused one comes again, everything
// after it from the same endpoint; A holds the refused ones and resends
// them in order after a backoff. The senders must see every Send complete
// Ok exactly once (no Busy reaches them), the sink every message intact and
// in per-sender order, and both daemons' counters must show the refusals
// and resends really happened.
// FERRY_MH_NET=loopback|netns picks the network (see cluster.h).
#include <catch2/catch.hpp>
#include <string>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {

constexpr std::uint32_t kSenders = 3;
constexpr std::uint64_t kMessages = 60;

std::uint64_t counter(const Node& n, const char* key) {
  StatusView s;
  return read_status(n.control(), &s).ok() ? s.counter(key) : 0;
}

}  // namespace

TEST_CASE("a full receiver refuses, the sender resends in order: nothing lost, no Busy to the app") {
  DaemonFlags f;
  f.extra_args = {"--rx-arena-bytes", "2m", "--staging-bytes", "0"};
  Cluster cl(2, net_mode_from_env(), f);
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen());

  Gate sink_ready;
  SinkSpec sink{b.socket(), "sink", kSenders, kMessages};
  const pid_t sinker = cl.spawn_on(1, [&] { return run_sink(sink, sink_ready); });
  REQUIRE(sink_ready.wait(10s));
  std::vector<pid_t> senders;
  for (std::uint32_t i = 0; i < kSenders; ++i) {
    SenderSpec s{a.socket(), b.target("sink"), i, kMessages, 8};
    senders.push_back(cl.spawn_on(0, [s] { return run_sender(s); }));
  }
  int failed = 0;
  for (pid_t p : senders) failed += reap(p, 60s) != 0;  // run_sender fails on any status but Ok
  failed += reap(sinker, 30s) != 0;                     // run_sink: checksums, per-sender order, count
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(failed == 0);
  CHECK(counter(b, "busy_rejects") > 0);
  CHECK(counter(a, "busy_backoffs") > 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}
