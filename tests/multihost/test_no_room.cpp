// An Open rides out a moment with no free peer connection slot here.
//
// A lane's dial: A (--peer-max-connections 3, one lane a channel) holds a
// channel to B (two connections), so its channel to C gets a bootstrap
// connection but no lane: the lane's dial fails Busy and that channel
// fails before it was ever Up. The Open to C is kept (like one whose
// handshake was slow) and dialled again every 100 ms within its budget
// until B is killed, which frees B's two connections; then it succeeds and
// a call over it verifies. Two daemons that dial each other at once in a
// mesh run into such a moment (tests/multihost/test_mesh32.cpp).
//
// The bootstrap's dial: with --peer-max-connections 2 the channel to B
// takes every slot, so the Open's first dial to C is refused here at once
// (Busy). The Open waits for a slot the same way: it succeeds once B is
// killed, and fails Busy (not PeerUnreachable: C was never tried) when no
// slot frees within its budget of 4 x connect-timeout-ms. Several Opens
// waiting at once take turns to dial: one refused dial per 100 ms between
// them, not one each.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <vector>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/roles.h"
#include "tests/multihost/status_json.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {

// A with --peer-max-connections `slots` and one lane a channel (a channel:
// two connections), B and C plain.
DaemonFlags no_room_flags(const char* slots, std::uint32_t connect_timeout_ms) {
  DaemonFlags f;
  f.channel_conns = 1;
  f.connect_timeout_ms = connect_timeout_ms;  // the Open's budget: 4 x this
  f.node_args = {{"--peer-max-connections", slots}, {}, {}};
  return f;
}

// A's client holds a channel to B, then opens C; the test kills B (which
// frees B's two slots) once A's log shows `refusal` (and `then`, if given),
// and the Open to C must succeed and carry a verified call.
void open_waits_for_a_slot(const char* slots, const char* refusal, const char* then = nullptr) {
  Cluster cl(3, net_mode_from_env(), no_room_flags(slots, 2000));
  INFO("mode " << to_string(cl.mode()) << ", " << slots << " slots");
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  const Node& c = cl.node(2);
  Gate ready, stop, holding;
  const pid_t server_b = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready, stop); });
  const pid_t server_c = cl.spawn_on(2, [&] { return run_rpc_server({c.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));
  REQUIRE(ready.wait(10s));

  const pid_t client = cl.spawn_on(0, [&]() -> int {
    auto cli = attach_retry(a.socket(), "no-room");
    if (!cli) return fail(1, "attach");
    auto to_b = cli->open(b.target("echo"), 10s);  // A's channel to B: two of its slots
    if (!to_b) return fail(2, "open B: %s", to_string(to_b.status).data());
    holding.signal();
    auto to_c = cli->open(c.target("echo"), 15s);
    if (!to_c) return fail(3, "open C: %s", to_string(to_c.status).data());
    if (const Status st = echo_checked(*cli, to_c.value, 1500, 5, 1); st != Status::Ok)
      return fail(4, "echo over C: %s", to_string(st).data());
    return 0;
  });
  REQUIRE(holding.wait(10s));
  // B goes only once A's dial to C found no room and the Open was kept.
  const bool no_room = cl.log_has(0, refusal, 10s);
  INFO("A log before B was killed:\n" << cl.log_tail(0, 6000));
  REQUIRE(no_room);
  if (then != nullptr) REQUIRE(cl.log_has(0, then, 5s));
  cl.kill_hard(1);
  const int rc = reap(client, 30s);
  INFO("A log:\n" << cl.log_tail(0, 6000));
  CHECK(rc == 0);
  stop.signal();
  CHECK(reap(server_c, 10s) == 0);
  (void)reap(server_b, 10s);  // its daemon is gone: it ends as it may
  CHECK(cl.alive(0));
  CHECK(cl.alive(2));
}

}  // namespace

TEST_CASE("no room: an Open waits out a lane dial that found every connection slot taken, then succeeds") {
  // Three slots: C's bootstrap gets the last one, its lane none; the
  // channel fails (Busy) before it was Up and its Open is kept.
  open_waits_for_a_slot("3", "lane connect failed (Busy)", "1 opens kept for a redial");
}

TEST_CASE("no room: an Open whose first dial found no free slot waits for one, then succeeds") {
  // Two slots: the bootstrap's own dial is refused here.
  open_waits_for_a_slot("2", "bootstrap connect failed (Busy)");
}

TEST_CASE("no room: Opens that find no free slot within their budget fail Busy, dialling one at a time") {
  Cluster cl(3, net_mode_from_env(), no_room_flags("2", 300));  // a budget of 1.2 s
  INFO("mode " << to_string(cl.mode()));
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  const Node& c = cl.node(2);
  Gate ready, holding, done, stop;
  const pid_t server_b = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));

  // Every client of A on engine 0 (peer-max-connections is per engine):
  // the holder's channel to B takes both of its slots.
  const auto on_engine_0 = [] { ::setenv("FERRY_ENGINE", "0", 1); };
  // After the openers, a verified call over B: the refusals cost A nothing else.
  const pid_t holder = cl.spawn_on(0, [&] {
    on_engine_0();
    return hold_then_echo(a.socket(), "no-room-holder", b.target("echo"), holding, done, 7);
  });
  REQUIRE(holding.wait(10s));

  // Several Opens to C wait for a slot at once; each fails Busy (not
  // PeerUnreachable: C was never tried) once its budget is spent.
  constexpr int kOpeners = 6;
  const auto t0 = Clock::now();
  std::vector<pid_t> openers;
  for (int i = 0; i < kOpeners; ++i) {
    openers.push_back(cl.spawn_on(0, [&, i] {
      on_engine_0();
      return open_expect_busy(a.socket(), "no-room-busy-" + std::to_string(i), c.target("echo"), 10s, 1000ms);
    }));
  }
  for (const pid_t p : openers) CHECK(reap(p, 30s) == 0);
  const auto waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  done.signal();
  CHECK(reap(holder, 30s) == 0);
  INFO("A log:\n" << cl.log_tail(0, 6000));
  CHECK(cl.log_tail(0, 64 * 1024).find("bootstrap connect failed (Busy)") != std::string::npos);
  const auto st = status_json(a);
  REQUIRE(st);
  // The Opens take turns to dial: after a dial found no slot, the next
  // comes 100 ms later or when a connection closes, whoever asks, so the
  // refused dials count the waiting time, not the Opens times it (one
  // each every 100 ms would be about kOpeners x 12 here).
  const std::uint64_t refused = counter(*st, "peer_dials_refused");
  INFO("peer_dials_refused " << refused << " over " << waited_ms << " ms");
  CHECK(refused >= 2);
  CHECK(refused <= static_cast<std::uint64_t>(waited_ms / 100 + 2));
  // ... and logged once: the redials' lines are rate-limited (one per 10 s).
  const std::string log = cl.log_tail(0, 256 * 1024);
  std::size_t lines = 0;
  for (auto at = log.find("connect failed (Busy)"); at != std::string::npos;
       at = log.find("connect failed (Busy)", at + 1))
    ++lines;
  CHECK(lines == 1);
  // Both of A's slots held by its channel to B, as its status says.
  CHECK(counter(*st, "peer_connections") == 2);
  const json::Value* engines = st->find("engines");
  REQUIRE(engines != nullptr);
  REQUIRE(engines->as_array() != nullptr);
  std::uint64_t per_engine = 0;  // one engine, or the CI's --engines 2 pass: their sum
  for (const json::Value& e : *engines->as_array()) {
    const json::Value* conns = e.find("peer_connections");
    REQUIRE(conns != nullptr);
    per_engine += conns->as_uint().value_or(1000);
  }
  CHECK(per_engine == 2);
  stop.signal();
  CHECK(reap(server_b, 10s) == 0);
  CHECK(cl.alive(0));
}
