// (c) Processes SIGKILLed mid-traffic: the daemon notices (client count
// drops within 2 s), fails exactly the affected operations, and keeps
// serving everyone else with verified traffic.
#include <signal.h>

#include <catch2/catch.hpp>
#include <set>

#include "tests/integration/traffic.h"

using namespace ferry;
using namespace ferry::itest;

TEST_CASE("a caller killed with calls in flight does not disturb the others") {
  Daemon d;
  Gate ready, server_stop, caller_stop, victim_progress, never;
  const pid_t server = spawn([&] { return run_rpc_server({d.socket()}, ready, server_stop); });
  REQUIRE(ready.wait(10s));
  CallerSpec good;
  good.socket = d.socket();
  good.caller = 1;
  good.count = 100;
  good.concurrency = 4;
  good.max_size = 300000;
  good.stop = &caller_stop;
  const pid_t survivor = spawn([good] { return run_caller(good); });
  CallerSpec bad = good;
  bad.caller = 2;
  bad.concurrency = 8;
  bad.stop = &never;  // runs until killed
  bad.progress = &victim_progress;
  bad.progress_after = 30;
  const pid_t victim = spawn([bad] { return run_caller(bad); });
  REQUIRE(victim_progress.wait(20s));
  REQUIRE(d.wait_clients(3, 2s));
  ::kill(victim, SIGKILL);
  CHECK(reap(victim, 5s) == 128 + SIGKILL);
  CHECK(d.wait_clients(2, 2s));
  caller_stop.signal();  // the survivor now makes 100 more verified calls
  CHECK(reap(survivor, 30s) == 0);
  server_stop.signal();
  CHECK(reap(server, 10s) == 0);
  CHECK(d.alive());
}

TEST_CASE("a server killed with calls in flight fails each of them once with ServiceGone") {
  Daemon d;
  constexpr std::uint32_t kCalls = 12;
  Gate hold_ready, hold_stop, held, caller_done, xform_ready, xform_stop, other_stop;
  const pid_t holder = spawn([&] {
    RpcServerSpec s{d.socket(), "holder", true};
    return run_rpc_server(s, hold_ready, hold_stop, &held);
  });
  REQUIRE(hold_ready.wait(10s));
  // An unrelated pair that must keep working across the kill.
  const pid_t xserver = spawn([&] { return run_rpc_server({d.socket()}, xform_ready, xform_stop); });
  REQUIRE(xform_ready.wait(10s));
  CallerSpec other;
  other.socket = d.socket();
  other.caller = 5;
  other.count = 100;
  other.max_size = 200000;
  other.stop = &other_stop;
  const pid_t other_caller = spawn([other] { return run_caller(other); });

  const pid_t caller = spawn([&]() -> int {
    auto c = attach_retry(d.socket(), "hold-caller");
    if (!c) return fail(1, "attach");
    auto ep = open_retry(*c, "hold");
    if (!ep) return fail(2, "open hold");
    Buffer req = c->alloc(64), resp = c->alloc(64);
    fill_payload(req.data, 64, 3, 0);
    for (std::uint64_t i = 0; i < kCalls; ++i) {
      if (c->call(ep.value, req, 64, resp, 1000 + i) != Status::Ok) return fail(3, "call");
    }
    std::set<std::uint64_t> seen;
    const auto deadline = Clock::now() + 15s;
    Completion out[16];
    while (seen.size() < kCalls && Clock::now() < deadline) {
      const std::size_t n = c->wait(out, 100ms);
      for (std::size_t i = 0; i < n; ++i) {
        if (out[i].status != Status::ServiceGone)
          return fail(4, "call completed %s", std::string(to_string(out[i].status)).c_str());
        if (!seen.insert(out[i].user_data).second)
          return fail(5, "call %llu completed twice", (unsigned long long)out[i].user_data);
      }
    }
    if (seen.size() != kCalls) return fail(6, "%zu of %u calls completed", seen.size(), kCalls);
    // Nothing more may arrive for them.
    if (c->wait(out, 300ms) != 0) return fail(7, "extra completion after all calls failed");
    if (c->state() != Status::Ok) return fail(8, "client state %s", std::string(to_string(c->state())).c_str());
    return 0;
  });
  for (std::uint32_t i = 0; i < kCalls; ++i) REQUIRE(held.wait(10s));
  const long before = d.clients();
  CHECK(before == 4);
  ::kill(holder, SIGKILL);
  CHECK(reap(holder, 5s) == 128 + SIGKILL);
  CHECK(d.wait_clients_at_most(before - 1, 2s));
  CHECK(reap(caller, 20s) == 0);
  CHECK(d.wait_clients(2, 2s));  // holder and the finished caller are gone
  other_stop.signal();
  CHECK(reap(other_caller, 30s) == 0);
  xform_stop.signal();
  CHECK(reap(xserver, 10s) == 0);
  CHECK(d.alive());
}
