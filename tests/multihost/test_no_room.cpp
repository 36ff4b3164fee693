// An Open rides out a moment with no free peer connection slot here: A
// (--peer-max-connections 3, one lane a channel) holds a channel to B
// (two connections), so its channel to C gets a bootstrap connection but
// no lane: the lane's dial fails Busy and that channel fails before it was
// ever Up. The Open to C is kept (like one whose handshake was slow) and
// dialled again every 100 ms within its budget until B is killed, which
// frees B's two connections; then it succeeds and a call over it
// verifies. Two daemons that dial each other at once in a mesh run into
// such a moment (tests/multihost/test_mesh32.cpp).
#include <catch2/catch.hpp>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("no room: an Open waits out a lane dial that found every connection slot taken, then succeeds") {
  DaemonFlags flags;
  flags.channel_conns = 1;
  flags.connect_timeout_ms = 2000;  // the Open's budget: 4 x this
  flags.node_args = {{"--peer-max-connections", "3"}, {}, {}};
  Cluster cl(3, net_mode_from_env(), flags);
  INFO("mode " << to_string(cl.mode()));
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
    auto to_b = cli->open(b.target("echo"), 10s);  // A's channel to B: two of its three slots
    if (!to_b) return fail(2, "open B: %s", to_string(to_b.status).data());
    holding.signal();
    auto to_c = cli->open(c.target("echo"), 15s);
    if (!to_c) return fail(3, "open C: %s", to_string(to_c.status).data());
    if (const Status st = echo_checked(*cli, to_c.value, 1500, 5, 1); st != Status::Ok)
      return fail(4, "echo over C: %s", to_string(st).data());
    return 0;
  });
  REQUIRE(holding.wait(10s));
  // B goes only once A's lane dial to C found no room and the Open was kept.
  const bool no_room = cl.log_has(0, "lane connect failed (Busy)", 10s);
  INFO("A log before B was killed:\n" << cl.log_tail(0, 6000));
  REQUIRE(no_room);
  REQUIRE(cl.log_has(0, "1 opens moved", 5s));
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
