// Compacting engines (daemon/engines/compaction.h): an idle engine is run
// by engine 0's thread, a busy one gets its own thread back and returns
// when it is idle again, with calls crossing engines throughout, every byte
// checked and every call completed once; engine-threads bounds the threads
// and engine-compact off keeps every engine on its own.

#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/traffic.h"

using namespace ferry;
using namespace ferry::itest;

namespace {

// Polls engines[engine].thread until it is `want` or `within` passes.
bool wait_thread(const Daemon& d, std::uint32_t engine, long want, std::chrono::milliseconds within) {
  const auto until = Clock::now() + within;
  while (Clock::now() < until) {
    if (d.engine_number(engine, "thread") == want) return true;
    std::this_thread::sleep_for(20ms);
  }
  return d.engine_number(engine, "thread") == want;
}

// Heavy traffic on engine 1 (a server and pipelined callers on it) and a
// caller on engine 0 crossing to it, until `stop`; returns the callers.
struct Load {
  Gate ready, server_stop, stop;
  pid_t server = -1;
  std::vector<pid_t> callers;

  void start(const Daemon& d) {
    server = spawn_on_engine(1, [&] { return run_rpc_server({d.socket()}, ready, server_stop); });
    REQUIRE(ready.wait(10s));
    for (std::uint32_t i = 0; i < 3; ++i) {
      CallerSpec c;
      c.socket = d.socket();
      c.target = i == 0 ? "xform" : "echo";
      c.caller = i;
      c.count = 100;  // after stop
      c.concurrency = 16;
      c.max_size = 256;
      c.stop = &stop;
      callers.push_back(spawn_on_engine(i == 0 ? 0 : 1, [c] { return run_caller(c); }));
    }
  }
  // Stops the callers (each makes its last calls, every one checked) and the server.
  void finish() {
    stop.signal();
    stop.signal();
    stop.signal();
    for (pid_t p : callers) CHECK(reap(p, 40s) == 0);
    server_stop.signal();
    CHECK(reap(server, 20s) == 0);
  }
};

}  // namespace

TEST_CASE("an idle engine runs on engine 0's thread, a busy one on its own, and back when idle") {
  Daemon d({"--engines", "2", "--engine-compact", "on", "--engine-threads", "2"});
  REQUIRE(wait_thread(d, 1, 0, 5s));
  Load load;
  load.start(d);
  // Engine 0's thread, busy with both engines' turns, hands engine 1 back.
  const bool expanded = wait_thread(d, 1, 1, 30s);
  load.finish();
  CHECK(expanded);
  // Idle again: after its second on its own thread, engine 1 rejoins.
  CHECK(wait_thread(d, 1, 0, 10s));
  CHECK(d.status_number("engine_expansions") >= 1);
  CHECK(d.status_number("engine_compactions") >= 2);
  CHECK(d.engine_number(0, "cross_engine_out") > 100);
  CHECK(d.wait_clients(0, 5s));
}

TEST_CASE("engine-threads 1: every engine stays on engine 0's thread under load") {
  Daemon d({"--engines", "2", "--engine-compact", "on", "--engine-threads", "1"});
  REQUIRE(wait_thread(d, 1, 0, 5s));
  Load load;
  load.start(d);
  std::this_thread::sleep_for(1500ms);
  CHECK(d.engine_number(1, "thread") == 0);
  load.finish();
  CHECK(d.status_number("engine_expansions") == 0);
  CHECK(d.status_number("engine_compactions") == 1);
  CHECK(d.wait_clients(0, 5s));
}

TEST_CASE("engine-compact off: each engine on its own thread, idle or not") {
  Daemon d({"--engines", "2", "--engine-compact", "off"});
  std::this_thread::sleep_for(300ms);
  CHECK(d.engine_number(1, "thread") == 1);
  CHECK(d.status_number("engine_compactions") == 0);
}
