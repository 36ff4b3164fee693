// (e) ferryd SIGKILLed while a client has operations in flight: each one
// completes with DaemonGone exactly once, state() turns DaemonGone, and a
// fresh daemon can be attached to afterwards.
#include <signal.h>

#include <catch2/catch.hpp>
#include <set>

#include "tests/integration/traffic.h"

using namespace ferry;
using namespace ferry::itest;

TEST_CASE("daemon killed mid-flight: every op fails once with DaemonGone; a new daemon works") {
  constexpr std::uint64_t kCalls = 10;
  auto d = std::make_unique<Daemon>();
  Gate ready, stop, held, client_ready, go;
  const pid_t holder = spawn([&] {
    RpcServerSpec s{d->socket(), "holder", true};
    return run_rpc_server(s, ready, stop, &held);
  });
  REQUIRE(ready.wait(10s));
  const std::string sock = d->socket();
  const pid_t client = spawn([&, sock]() -> int {
    auto c = attach_retry(sock, "doomed");
    if (!c) return fail(1, "attach");
    auto ep = open_retry(*c, "hold");
    if (!ep) return fail(2, "open");
    Buffer req = c->alloc(128), resp = c->alloc(128);
    fill_payload(req.data, 128, 1, 0);
    std::set<std::uint64_t> want;
    for (std::uint64_t i = 0; i < kCalls; ++i) {
      if (c->call(ep.value, req, 128, resp, i) != Status::Ok) return fail(3, "call");
      want.insert(i);
    }
    client_ready.signal();
    if (!go.wait(15s)) return fail(4, "never told the daemon died");
    // Sends submitted now may or may not reach the dying daemon: each still completes once.
    std::set<std::uint64_t> seen;
    const auto deadline = Clock::now() + 10s;
    Completion out[16];
    while (seen.size() < want.size() && Clock::now() < deadline) {
      const std::size_t n = c->wait(out, 100ms);
      for (std::size_t i = 0; i < n; ++i) {
        if (out[i].kind != Completion::Kind::OpDone || out[i].status != Status::DaemonGone) {
          return fail(5, "completion %s/%s", to_string(out[i].kind).data(), to_string(out[i].status).data());
        }
        if (!want.count(out[i].user_data) || !seen.insert(out[i].user_data).second)
          return fail(6, "duplicate or unknown completion %llu", (unsigned long long)out[i].user_data);
      }
    }
    if (seen.size() != want.size()) return fail(7, "%zu of %zu ops completed", seen.size(), want.size());
    if (c->state() != Status::DaemonGone) return fail(8, "state %s", to_string(c->state()).data());
    if (c->wait(out, 200ms) != 0) return fail(9, "completions after the sweep");
    if (c->call(ep.value, req, 128, resp, 99) != Status::DaemonGone) return fail(10, "call after daemon death");
    if (c->open("hold").status != Status::DaemonGone) return fail(11, "open after daemon death");
    return 0;
  });
  REQUIRE(client_ready.wait(10s));
  for (std::uint64_t i = 0; i < kCalls; ++i) REQUIRE(held.wait(10s));
  d->kill_hard();
  go.signal();
  CHECK(reap(client, 20s) == 0);
  stop.signal();
  // The holder's own client state turned DaemonGone; it just exits when stopped.
  CHECK(reap(holder, 10s) == 0);
  d.reset();

  Daemon fresh;
  const pid_t again = spawn([&]() -> int {
    auto c = attach_retry(fresh.socket(), "again");
    if (!c) return fail(1, "attach to the new daemon");
    auto sid = c->serve("again");
    if (!sid) return fail(2, "serve: %s", to_string(sid.status).data());
    auto ep = c->open("again");
    if (!ep) return fail(3, "open: %s", to_string(ep.status).data());
    Buffer b = c->alloc(1000);
    fill_payload(b.data, 1000, 4, 0);
    if (c->send(ep.value, b, 1000, 1) != Status::Ok) return fail(4, "send");
    int got = 0;
    const auto deadline = Clock::now() + 5s;
    Completion out[4];
    while (got < 2 && Clock::now() < deadline) {
      const std::size_t n = c->wait(out, 100ms);
      for (std::size_t i = 0; i < n; ++i) {
        if (out[i].kind == Completion::Kind::Message) {
          if (!check_payload(out[i].data, out[i].length, 4, 0)) return fail(5, "payload");
          c->release(out[i]);
        } else if (out[i].status != Status::Ok) {
          return fail(6, "send: %s", to_string(out[i].status).data());
        }
        ++got;
      }
    }
    return got == 2 ? 0 : fail(7, "no self delivery");
  });
  CHECK(reap(again, 15s) == 0);
}
