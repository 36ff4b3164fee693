// (d) Error statuses across daemons: ServiceNotFound for a service the
// remote daemon lacks, PeerUnreachable within --connect-timeout-ms (plus
// slack) for an address where no daemon listens, EndpointClosed after
// close (and Cancelled for the calls a close cut short), and the daemon
// keeps serving the good peer throughout.
#include <catch2/catch.hpp>
#include <cstring>
#include <set>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"
#include "tests/multihost/roles.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {

constexpr auto kSlack = 2000ms;

std::string st(Status s) { return std::string(to_string(s)); }

}  // namespace

TEST_CASE("remote errors: ServiceNotFound, PeerUnreachable in bounded time, EndpointClosed") {
  DaemonFlags flags;
  flags.connect_timeout_ms = 1000;
  Cluster cl(2, net_mode_from_env(), flags);
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  const std::string unreachable = cl.unreachable_target("echo");
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen() << ", nobody at "
               << unreachable);

  Gate ready, stop, hold_ready, hold_stop, held;
  const pid_t server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready, stop); });
  const pid_t holder = cl.spawn_on(1, [&] {
    RpcServerSpec s{b.socket(), "holder", true};
    return run_rpc_server(s, hold_ready, hold_stop, &held);
  });
  REQUIRE(ready.wait(10s));
  REQUIRE(hold_ready.wait(10s));

  const auto bound = std::chrono::milliseconds(flags.connect_timeout_ms) + kSlack;
  const pid_t client = cl.spawn_on(0, [&]() -> int {
    auto c = attach_retry(a.socket(), "errors");
    if (!c) return fail(1, "attach");
    // A service B does not have; B itself is reachable.
    auto missing = c->open(b.target("no-such-service"));
    if (missing.status != Status::ServiceNotFound)
      return fail(2, "open unknown remote service: %s", st(missing.status).c_str());

    // Nobody listens there: PeerUnreachable, within the configured bound.
    const auto t0 = Clock::now();
    auto gone = c->open(unreachable, 20s);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    std::fprintf(stderr, "open %s: %s after %lld ms\n", unreachable.c_str(), st(gone.status).c_str(),
                 (long long)took.count());
    if (gone.status != Status::PeerUnreachable) return fail(3, "open unreachable: %s", st(gone.status).c_str());
    if (took > bound)
      return fail(4, "PeerUnreachable after %lld ms, bound %lld ms", (long long)took.count(), (long long)bound.count());
    // Right after a failed dial the address is not dialled again: the next
    // Open fails at once (redial rate limit; counted as redials_deferred).
    auto again = c->open(unreachable, 20s);
    if (again.status != Status::PeerUnreachable)
      return fail(19, "second open unreachable: %s", st(again.status).c_str());

    // The good peer still works, with verified bytes.
    auto ep = c->open(b.target("echo"));
    if (!ep) return fail(5, "open echo on B: %s", st(ep.status).c_str());
    Buffer req = c->alloc(5000), resp = c->alloc(5000);
    fill_payload(req.data, 5000, 9, 1);
    Completion r = call_once(*c, ep.value, req, 5000, resp, 1);
    if (r.status != Status::Ok || r.length != 5000 || !check_payload(resp.data, 5000, 9, 1))
      return fail(6, "echo on B: %s", st(r.status).c_str());

    // Closed endpoint: EndpointClosed, for a call and for a second close.
    if (c->close(ep.value) != Status::Ok) return fail(7, "close");
    r = call_once(*c, ep.value, req, 5000, resp, 2);
    if (r.status != Status::EndpointClosed) return fail(8, "call after close: %s", st(r.status).c_str());
    const Status s2 = c->send(ep.value, req, 100, 3);
    if (s2 == Status::Ok) {
      Completion got[4];
      std::size_t n = 0;
      const auto deadline = Clock::now() + 5s;
      while (n == 0 && Clock::now() < deadline) n = c->wait(got, 100ms);
      if (n == 0 || got[0].status != Status::EndpointClosed)
        return fail(9, "send after close: %s", n ? st(got[0].status).c_str() : "no completion");
    } else if (s2 != Status::EndpointClosed) {
      return fail(9, "send after close refused with %s", st(s2).c_str());
    }
    if (c->close(ep.value) != Status::EndpointClosed) return fail(10, "double close");

    // Close with calls in flight (B holds them): each completes once, Cancelled (OPS.md).
    auto hep = c->open(b.target("hold"));
    if (!hep) return fail(11, "open hold on B: %s", st(hep.status).c_str());
    Buffer hreq = c->alloc(64), hresp = c->alloc(64);
    fill_payload(hreq.data, 64, 9, 0);
    for (std::uint64_t i = 0; i < 4; ++i)
      if (c->call(hep.value, hreq, 64, hresp, 100 + i) != Status::Ok) return fail(12, "hold call");
    for (int i = 0; i < 4; ++i)
      if (!held.wait(5s)) return fail(13, "B did not receive the held calls");
    std::set<std::uint64_t> seen;
    Completion got[8];
    // close() keeps other completions for poll(): the cancelled calls come through there.
    if (c->close(hep.value) != Status::Ok) return fail(14, "close with calls in flight");
    const auto deadline = Clock::now() + 5s;
    while (seen.size() < 4 && Clock::now() < deadline) {
      const std::size_t n = c->wait(got, 100ms);
      for (std::size_t i = 0; i < n; ++i) {
        if (got[i].op != OpKind::Call) continue;
        if (got[i].status != Status::Cancelled)
          return fail(15, "held call completed %s, expected Cancelled", st(got[i].status).c_str());
        if (!seen.insert(got[i].user_data).second) return fail(16, "held call completed twice");
      }
    }
    if (seen.size() != 4) return fail(17, "%zu of 4 held calls completed after close", seen.size());
    if (c->wait(got, 300ms) != 0) return fail(18, "extra completion after close");
    return 0;
  });
  CHECK(reap(client, 40s) == 0);
  {
    StatusView s;
    const Error read = read_status(a.control(), &s);
    INFO(read.message());
    REQUIRE(read.ok());
    CHECK(s.counter("redials_deferred") >= 1);
  }
  stop.signal();
  hold_stop.signal();
  CHECK(reap(server, 10s) == 0);
  CHECK(reap(holder, 10s) == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));

  // The unreachable address left no peer entry behind that claims to be up.
  StatusView sa;
  const Error read = read_status(a.control(), &sa);
  INFO(read.message());
  REQUIRE(read.ok());
  INFO("A: " << describe(sa));
  const std::string ua = unreachable.substr(0, unreachable.find('/'));
  const PeerView* u = find_peer(sa, ua);
  if (u) CHECK(u->state != "up");
}

TEST_CASE("a remote call held past its timeout completes Timeout; the late reply gets CallerGone") {
  Cluster cl(2, net_mode_from_env(), DaemonFlags{});
  TimeoutCallerSpec spec;
  spec.timeout = 300ms;
  spec.expect_ms = 300ms;
  CHECK(remote_call_times_out(cl, spec) == "");
  StatusView sb;
  const Error read = read_status(cl.node(1).control(), &sb);
  INFO(read.message());
  REQUIRE(read.ok());
  CHECK(sb.counter("call_timeouts") == 1);  // enforced where the server is
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}
