// A connect to a peer that never answers must not stall the daemon. Daemon A
// keeps a client calling echo on live peer B while a second client on A
// opens a service at an address where nothing answers; the calls must keep
// completing (max and P99 latency far below the connect timeout) for the
// whole time that Open is pending, and the Open must end PeerUnreachable
// within connect timeout + slack.
//
// Why the address is a true blackhole: NetnsLab::vacant_address() is on the
// lab's subnet (so `ip route get` names A's own veth: the lab checks that)
// but no namespace holds it, so A's ARP for it never resolves and no SYN
// ever leaves A; nothing can answer or refuse. The kernel gives up on the
// neighbour only after ~3 s (3 probes, 1 s apart), later than the 2 s
// connect timeout used here. A listener that never accepts would not do:
// the kernel completes the handshake for it. Loopback mode has no such
// address (a free port refuses at once), so this test runs in netns mode
// only (and exits 77 where namespaces cannot be made).
#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {

constexpr auto kSlack = 1500ms;

std::string st(Status s) { return std::string(to_string(s)); }

}  // namespace

TEST_CASE("a pending connect to a blackholed address does not stall traffic to a live peer") {
  DaemonFlags flags;
  flags.connect_timeout_ms = 2000;  // ferryd's default
  // A stalled engine must show up as slow calls here, not as B declaring A dead.
  flags.peer_timeout_ms = 6000;
  Cluster cl(2, net_mode_from_env(), flags);
  REQUIRE(cl.mode() == NetMode::Netns);  // see the header comment
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  const std::string blackhole = cl.unreachable_target("echo");
  INFO("A " << a.listen() << ", B " << b.listen() << ", blackhole " << blackhole);

  Gate ready, stop, warm, opening, opened;
  const pid_t server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));

  const auto connect_timeout = std::chrono::milliseconds(flags.connect_timeout_ms);
  // Calls to B: from `opening` until `opened` every call is timed.
  const pid_t caller = cl.spawn_on(0, [&]() -> int {
    auto c = attach_retry(a.socket(), "caller");
    if (!c) return fail(1, "attach");
    auto ep = c->open(b.target("echo"));
    if (!ep) return fail(2, "open echo on B: %s", st(ep.status).c_str());
    Buffer req = c->alloc(256), resp = c->alloc(256);
    std::vector<std::int64_t> during;
    during.reserve(1 << 16);
    std::uint64_t tag = 0;
    bool signalled_warm = false;
    const auto give_up = Clock::now() + 20s;
    while (!opened.ready()) {
      if (Clock::now() > give_up) return fail(3, "the blackhole Open never finished");
      const bool timing = opening.ready();
      ++tag;
      fill_payload(req.data, 256, 5, tag);
      const auto t0 = Clock::now();
      const Completion r = call_once(*c, ep.value, req, 256, resp, tag, 10s);
      if (r.status == Status::Timeout)
        return fail(4, "call %llu did not complete within 10 s", (unsigned long long)tag);
      if (r.status != Status::Ok || !check_payload(resp.data, 256, 5, tag))
        return fail(5, "call %llu: %s", (unsigned long long)tag, st(r.status).c_str());
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
      if (timing) during.push_back(us);
      if (!signalled_warm && tag >= 50) {
        warm.signal();
        signalled_warm = true;
      }
    }
    if (during.size() < 20) return fail(7, "only %zu calls completed while the Open was pending", during.size());
    std::sort(during.begin(), during.end());
    const std::int64_t p99 = during[during.size() * 99 / 100];
    const std::int64_t worst = during.back();
    std::fprintf(stderr, "%zu calls while the Open was pending: p50 %lld us, p99 %lld us, max %lld us\n", during.size(),
                 (long long)during[during.size() / 2], (long long)p99, (long long)worst);
    const std::int64_t timeout_us = std::chrono::duration_cast<std::chrono::microseconds>(connect_timeout).count();
    if (p99 > timeout_us / 10) return fail(8, "p99 %lld us, over a tenth of the connect timeout", (long long)p99);
    if (worst > timeout_us / 2) return fail(9, "a call took %lld us, over half the connect timeout", (long long)worst);
    return 0;
  });

  const auto bound = connect_timeout + kSlack;
  const pid_t opener = cl.spawn_on(0, [&]() -> int {
    auto c = attach_retry(a.socket(), "opener");
    if (!c) return fail(1, "attach");
    if (!warm.wait(15s)) return fail(2, "the caller never got going");
    opening.signal();
    const auto t0 = Clock::now();
    auto r = c->open(blackhole, 20s);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    opened.signal();
    std::fprintf(stderr, "open %s: %s after %lld ms\n", blackhole.c_str(), st(r.status).c_str(),
                 (long long)took.count());
    if (r.status != Status::PeerUnreachable) return fail(3, "open blackhole: %s", st(r.status).c_str());
    // Not sooner than the timeout either: nothing may answer a true blackhole.
    if (took < connect_timeout - 100ms) return fail(4, "PeerUnreachable after only %lld ms", (long long)took.count());
    if (took > bound)
      return fail(5, "PeerUnreachable after %lld ms, bound %lld ms", (long long)took.count(), (long long)bound.count());
    return 0;
  });

  CHECK(reap(opener, 40s) == 0);
  opened.signal();  // lets the caller finish even if the opener failed early
  CHECK(reap(caller, 40s) == 0);
  stop.signal();
  CHECK(reap(server, 10s) == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}
