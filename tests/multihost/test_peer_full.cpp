// An Open to a peer daemon that has no free connection slot for it.
//
// B (--peer-max-connections 3, one engine) holds a channel from C (its
// bootstrap and one lane), so B's listener takes A's bootstrap into its
// last slot and turns A's lane away. It says so (Goodbye(Busy) before it closes the connection), and A
// takes that for what it is: a full peer, not a dead one. A's channel
// fails Busy without counting a peer failure, and its Open waits for room
// within its budget (4 x connect-timeout-ms), dialled again at the
// address's redial interval: it succeeds once C's daemon dies and frees
// B's slots, and fails Busy (not PeerUnreachable) when no slot frees in
// time, B's channel to C unharmed. The same moment at A's own end is
// test_no_room.cpp.
#include <catch2/catch.hpp>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/roles.h"
#include "tests/multihost/status_json.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {

// B (node 1) with three slots and one engine (slots are per engine), one
// lane a channel (a channel: two connections). Three, not two: B admits
// at most half its slots' worth of connections not yet vouched for, and a
// channel's bootstrap is vouched for only once its lanes joined.
DaemonFlags peer_full_flags(std::uint32_t connect_timeout_ms) {
  DaemonFlags f;
  f.channel_conns = 1;
  f.connect_timeout_ms = connect_timeout_ms;  // the Open's budget: 4 x this
  f.node_args = {{}, {"--peer-max-connections", "3", "--engines", "1"}, {}};
  return f;
}

// B serving echo, and C's client holding a channel to it (two of B's
// slots) until finish(); then, when C's daemon still lives, a call over
// that channel must verify.
class FullB {
 public:
  explicit FullB(std::uint32_t connect_timeout_ms) : cl(3, net_mode_from_env(), peer_full_flags(connect_timeout_ms)) {
    const Node& b = cl.node(1);
    const Node& c = cl.node(2);
    server_ = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready_, stop_); });
    REQUIRE(ready_.wait(10s));
    // C's channel to B: two of B's slots, and after done_ a verified call.
    holder_ = cl.spawn_on(
        2, [&] { return hold_then_echo(c.socket(), "peer-full-holder", b.target("echo"), holding_, done_, 6); });
    REQUIRE(holding_.wait(10s));
  }
  void finish(bool c_alive) {
    done_.signal();
    const int rc = reap(holder_, 30s);
    if (c_alive) CHECK(rc == 0);  // C's channel to B carried on; with C's daemon gone it ends as it may
    stop_.signal();
    CHECK(reap(server_, 10s) == 0);
  }

  Cluster cl;

 private:
  Gate ready_, stop_, holding_, done_;
  pid_t server_ = -1;
  pid_t holder_ = -1;
};

// A's refusals were the peer's, counted and logged as such; none of them a
// peer failure.
void check_counted_as_full(const Cluster& cl) {
  const auto sa = status_json(cl.node(0));
  REQUIRE(sa);
  CHECK(counter(*sa, "peer_full_refusals") >= 1);
  CHECK(counter(*sa, "peer_failures") == 0);
  CHECK(counter(*sa, "peer_dials_refused") == 0);  // A itself had room
  CHECK(cl.log_tail(0, 64 * 1024).find("no free peer-max-connections slot there") != std::string::npos);
}

}  // namespace

TEST_CASE("peer full: an Open to a daemon with no free slot waits for one, then succeeds") {
  FullB full(2000);
  Cluster& cl = full.cl;
  INFO("mode " << to_string(cl.mode()));
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);

  const pid_t opener =
      cl.spawn_on(0, [&] { return open_and_echo(a.socket(), "peer-full", b.target("echo"), 15s, 1500, 5); });
  // C's daemon goes only once B turned A away and A heard why.
  const bool turned_away = cl.log_has(0, "turned our lane connection away", 10s);
  INFO("A log:\n" << cl.log_tail(0, 6000));
  REQUIRE(turned_away);
  cl.kill_hard(2);  // two of B's slots free as C's connections drop
  CHECK(reap(opener, 30s) == 0);
  check_counted_as_full(cl);
  const auto sb = status_json(b);
  REQUIRE(sb);
  CHECK(counter(*sb, "peer_accepts_refused") >= 1);
  full.finish(false);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}

TEST_CASE("peer full: an Open to a daemon that has no slot within its budget fails Busy") {
  FullB full(300);  // a budget of 1.2 s
  Cluster& cl = full.cl;
  INFO("mode " << to_string(cl.mode()));
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);

  const pid_t opener =
      cl.spawn_on(0, [&] { return open_expect_busy(a.socket(), "peer-full-busy", b.target("echo"), 10s, 1000ms); });
  const int rc = reap(opener, 30s);
  INFO("A log:\n" << cl.log_tail(0, 6000));
  CHECK(rc == 0);
  check_counted_as_full(cl);
  // Logged once however often B turned A away (one line per 10 s).
  const std::string log = cl.log_tail(0, 256 * 1024);
  std::size_t lines = 0;
  for (auto at = log.find("turned our"); at != std::string::npos; at = log.find("turned our", at + 1)) ++lines;
  CHECK(lines == 1);
  full.finish(true);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
  CHECK(cl.alive(2));
}
