// An Open that joined a channel the peer dialled rides out that channel's
// failure. When a daemon dials us, its bootstrap Hello names its --listen
// port, and our Opens to that address join its channel while it handshakes
// instead of dialling a duplicate (and an Open of ours whose own channel
// lost a duplicate race moves to it). Such a channel can fail before it is
// Up with the peer alive: in a full mesh our listener may have had no slot
// for its lane (test_mesh32). The Open named the address, not the channel,
// so it dials the address itself, within its budget, as after a slow
// handshake.
//
// Made on purpose here: a stranger on C's host sends A a Hello that claims
// C's --listen port and never dials a lane, so A's Open to C joins its
// channel, which fails at connect-timeout-ms (4 s). The Open must then reach the
// real C and a call over it verify; on a daemon without the rule it failed
// PeerUnreachable.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/fake_hello.h"
#include "tests/multihost/roles.h"
#include "transport/wire/header.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("peer dialled: an Open on a channel the peer dialled that fails before it is Up dials the peer itself") {
  DaemonFlags flags;
  // The joined channel fails at this deadline: time enough for the client to
  // attach and open on a loaded host. The Open's budget is 4 x this.
  flags.connect_timeout_ms = 4000;
  Cluster cl(2, net_mode_from_env(), flags);
  INFO("mode " << to_string(cl.mode()));
  const Node& a = cl.node(0);
  const Node& c = cl.node(1);
  Gate ready, stop, answered, release;
  const pid_t server = cl.spawn_on(1, [&] { return run_rpc_server({c.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));

  // From C's host (its namespace in netns mode), so A names the stranger's
  // channel C's address.
  const pid_t stranger = cl.spawn_on(1, [&]() -> int {
    const int fd = send_fake_hello(a.host, a.port, FakeHello{.epoch = 0x5eed'0000'0000'0001, .listen_port = c.port});
    if (fd < 0) return fail(1, "connect or Hello to A");
    const bool acked = read_answers(fd, wire::kHeaderBytes, 5s);  // A handled the Hello: C's address is routed
    if (acked) answered.signal();
    (void)release.wait(30s);  // no lane ever comes: A's side fails at its handshake deadline
    ::close(fd);
    return acked ? 0 : fail(2, "no HelloAck from A");
  });
  REQUIRE(answered.wait(10s));

  const pid_t client =
      cl.spawn_on(0, [&] { return open_and_echo(a.socket(), "peer-dialled", c.target("echo"), 10s, 1500, 8); });
  const int rc = reap(client, 30s);
  release.signal();
  INFO("A log:\n" << cl.log_tail(0, 6000));
  CHECK(rc == 0);
  // The Open waited on the stranger's channel and was kept when it failed.
  CHECK(cl.log_has(0, "1 opens kept for a redial", 1s));
  CHECK(reap(stranger, 10s) == 0);
  stop.signal();
  CHECK(reap(server, 10s) == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}
