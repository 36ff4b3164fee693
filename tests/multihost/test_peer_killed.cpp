// (d) A peer daemon SIGKILLed mid-traffic: daemon A has callers on B (one
// streaming verified echoes, one with calls B holds unanswered) and on C.
// After B dies every call in flight to it completes exactly once with
// PeerReset within --peer-timeout-ms (plus slack), a fresh open of B is
// PeerUnreachable, and C keeps serving A's callers with verified bytes.
#include <signal.h>

#include <catch2/catch.hpp>
#include <set>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"
#include "tests/multihost/roles.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

TEST_CASE("a peer daemon killed mid-traffic fails exactly its in-flight calls with PeerReset") {
  constexpr std::uint64_t kHeld = 10;
  DaemonFlags flags;
  flags.heartbeat_ms = 100;
  flags.peer_timeout_ms = 3000;  // the survivor's channel to C must outlive a loaded machine's stalls
  flags.connect_timeout_ms = 1000;
  Cluster cl(3, net_mode_from_env(), flags);
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  const Node& c = cl.node(2);
  const std::string b_echo = b.target("echo"), b_hold = b.target("hold");
  INFO("mode " << to_string(cl.mode()) << ", A " << a.listen() << ", B " << b.listen() << ", C " << c.listen());
  const auto bound = std::chrono::milliseconds(flags.peer_timeout_ms) + 2000ms;

  Gate b_ready, b_stop, hold_ready, hold_stop, held, c_ready, c_stop, killed, stream_progress, survivor_stop,
      survivor_progress;
  const pid_t b_server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, b_ready, b_stop); });
  const pid_t b_holder = cl.spawn_on(1, [&] {
    RpcServerSpec s{b.socket(), "holder", true};
    return run_rpc_server(s, hold_ready, hold_stop, &held);
  });
  const pid_t c_server = cl.spawn_on(2, [&] { return run_rpc_server({c.socket()}, c_ready, c_stop); });
  REQUIRE(b_ready.wait(10s));
  REQUIRE(hold_ready.wait(10s));
  REQUIRE(c_ready.wait(10s));

  UntilResetSpec stream;
  stream.socket = a.socket();
  stream.target = b_echo;
  stream.caller = 1;
  stream.progress = &stream_progress;
  stream.killed = &killed;
  stream.bound = bound;
  const pid_t streamer = cl.spawn_on(0, [stream] { return run_until_reset(stream); });

  CallerSpec survivor;
  survivor.socket = a.socket();
  survivor.target = c.target("xform");
  survivor.caller = 2;
  survivor.count = 80;
  survivor.concurrency = 4;
  survivor.max_size = 300000;
  survivor.stop = &survivor_stop;
  survivor.progress = &survivor_progress;
  survivor.progress_after = 10;
  const pid_t survivor_pid = cl.spawn_on(0, [survivor] { return run_caller(survivor); });

  const pid_t holder_caller = cl.spawn_on(0, [&]() -> int {
    auto cli = attach_retry(a.socket(), "hold-caller");
    if (!cli) return fail(1, "attach");
    auto ep = open_retry(*cli, b_hold);
    if (!ep) return fail(2, "open %s: %s", b_hold.c_str(), std::string(to_string(ep.status)).c_str());
    Buffer req = cli->alloc(64), resp = cli->alloc(64);
    fill_payload(req.data, 64, 3, 0);
    for (std::uint64_t i = 0; i < kHeld; ++i)
      if (cli->call(ep.value, req, 64, resp, 1000 + i) != Status::Ok) return fail(3, "call");
    std::set<std::uint64_t> seen;
    Clock::time_point killed_at{};
    const auto deadline = Clock::now() + 30s;
    Completion out[16];
    while (seen.size() < kHeld) {
      const auto now = Clock::now();
      if (now > deadline) return fail(4, "%zu of %llu held calls completed", seen.size(), (unsigned long long)kHeld);
      if (killed_at == Clock::time_point{} && killed.ready()) killed_at = now;
      if (killed_at != Clock::time_point{} && now > killed_at + bound)
        return fail(5, "%zu of %llu held calls completed %lld ms after the kill", seen.size(),
                    (unsigned long long)kHeld, (long long)bound.count());
      const std::size_t n = cli->wait(out, 20ms);
      for (std::size_t i = 0; i < n; ++i) {
        if (killed_at == Clock::time_point{} && !killed.ready())
          return fail(6, "a held call completed before the kill");
        if (out[i].kind != Completion::Kind::OpDone || out[i].op != OpKind::Call)
          return fail(7, "unexpected completion");
        if (out[i].status != Status::PeerReset)
          return fail(8, "held call completed %s, expected PeerReset", std::string(to_string(out[i].status)).c_str());
        if (!seen.insert(out[i].user_data).second)
          return fail(9, "held call %llu completed twice", (unsigned long long)out[i].user_data);
      }
    }
    if (cli->wait(out, 300ms) != 0) return fail(10, "a completion after every held call had completed");
    if (cli->state() != Status::Ok) return fail(11, "client state %s", std::string(to_string(cli->state())).c_str());
    // B is gone: opening it again is PeerUnreachable, not a hang.
    const auto t0 = Clock::now();
    auto again = cli->open(b_echo, 20s);
    const auto took = Clock::now() - t0;
    if (again.status != Status::PeerUnreachable)
      return fail(12, "open of the dead peer: %s", std::string(to_string(again.status)).c_str());
    if (took > std::chrono::milliseconds(flags.connect_timeout_ms) + 2000ms)
      return fail(13, "open of the dead peer took too long");
    return 0;
  });

  for (std::uint64_t i = 0; i < kHeld; ++i) REQUIRE(held.wait(10s));
  REQUIRE(stream_progress.wait(20s));
  REQUIRE(survivor_progress.wait(20s));

  // The gate opens just before the SIGKILL: a completion the clients see
  // after it may be the kill's doing; one before it may not.
  killed.signal();
  cl.kill_hard(1);  // SIGKILL + reap: B's calls are in flight right now
  CHECK(reap(streamer, 30s) == 0);
  CHECK(reap(holder_caller, 30s) == 0);

  // C is unaffected: the survivor makes 80 more verified calls through it.
  survivor_stop.signal();
  CHECK(reap(survivor_pid, 30s) == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(2));
  StatusView sa;
  const Error read = read_status(a.control(), &sa);
  INFO(read.message());
  REQUIRE(read.ok());
  INFO("A after the kill: " << describe(sa));
  const PeerView* pc = find_peer(sa, c.listen());
  REQUIRE(pc != nullptr);
  CHECK(pc->channels.size() == flags.channel_conns);
  const PeerView* pb = find_peer(sa, b.listen());
  if (pb) CHECK(pb->state != "up");

  // B's own clients saw their daemon go; they stop when told.
  b_stop.signal();
  hold_stop.signal();
  c_stop.signal();
  CHECK(reap(c_server, 10s) == 0);
  reap(b_server, 10s);
  reap(b_holder, 10s);
}
