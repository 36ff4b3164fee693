// engine-yield-watch (daemon/loop/yield_watch.h): with the watch on, a
// spinning engine that finds its yields handing the CPU to a long-running
// task stops yielding for a while: with a nice-19 CPU hog on every CPU and
// calls going back and forth, the daemon counts yields that kept it off
// its CPU (engine_yields_lost) and sleeps where it would have yielded
// (engine_yield_sleeps); with the watch off (the default) it counts
// neither. Every call completes once with its bytes checked.

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "tests/integration/traffic.h"

using namespace ferry;
using namespace ferry::itest;

namespace {

// A process at nice 19 spinning on `cpu` until killed: a batch job.
pid_t start_hog(int cpu) {
  return spawn([cpu] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)::sched_setaffinity(0, sizeof set, &set);
    (void)::setpriority(PRIO_PROCESS, 0, 19);
    std::uint64_t n = 0;
    for (;;) {
      n = n + 1;
      asm volatile("" : "+r"(n));  // kept: a loop the compiler may not drop
    }
    return 0;
  });
}

struct Counts {
  long lost = 0;
  long sleeps = 0;
};

// Calls back and forth beside a hog on every CPU for at least `at_least`,
// until `enough` holds or 30 s pass; every call checked. The counters read last.
template <typename Enough>
Counts calls_beside_hogs(const Daemon& d, Enough enough, std::chrono::milliseconds at_least) {
  Gate ready, server_stop, stop;
  const pid_t server = spawn([&] { return run_rpc_server({d.socket()}, ready, server_stop); });
  REQUIRE(ready.wait(10s));
  std::vector<pid_t> hogs;
  cpu_set_t mine;
  REQUIRE(::sched_getaffinity(0, sizeof mine, &mine) == 0);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mine)) hogs.push_back(start_hog(cpu));
  }
  // One call at a time: between calls the engine spins and yields while
  // the server and the caller take their turns, on CPUs a hog shares.
  CallerSpec c;
  c.socket = d.socket();
  c.target = "echo";
  c.count = 100;  // after stop
  c.concurrency = 1;
  c.max_size = 256;
  c.stop = &stop;
  const pid_t caller = spawn([c] { return run_caller(c); });
  const auto start = Clock::now();
  Counts n;
  while (Clock::now() < start + 30s) {
    n = {d.status_number("engine_yields_lost"), d.status_number("engine_yield_sleeps")};
    if (Clock::now() >= start + at_least && enough(n)) break;
    std::this_thread::sleep_for(50ms);
  }
  for (pid_t h : hogs) {
    ::kill(h, SIGKILL);
    (void)reap(h, 5s);
  }
  stop.signal();
  CHECK(reap(caller, 40s) == 0);  // every call completed once, its reply checked
  server_stop.signal();
  CHECK(reap(server, 20s) == 0);
  CHECK(d.wait_clients(0, 5s));
  return n;
}

}  // namespace

TEST_CASE("with engine-yield-watch on, an engine whose yields run a batch job sleeps instead") {
  Daemon d({"--engine-yield-watch", "on"});
  const Counts n = calls_beside_hogs(
      d, [](const Counts& c) { return c.lost >= 1 && c.sleeps >= 1; }, 0s);
  INFO("yields lost " << n.lost << ", sleeps instead of yields " << n.sleeps);
  CHECK(n.lost >= 1);
  CHECK(n.sleeps >= 1);
}

TEST_CASE("with engine-yield-watch off (the default), the engine keeps yielding beside a batch job") {
  Daemon d;
  const Counts n = calls_beside_hogs(
      d, [](const Counts&) { return true; }, 2s);
  CHECK(n.lost == 0);
  CHECK(n.sleeps == 0);
}
