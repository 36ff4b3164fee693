// ferryd with several engines (daemon/engines/): clients placed where they
// ask, calls and sends crossing between engines in both directions with
// every byte checked, and exactly one completion per operation when a
// process on the other engine is killed mid-traffic.
#include <signal.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <string>

#include "tests/integration/traffic.h"

using namespace ferry;
using namespace ferry::itest;

namespace {

long engine_number(const Daemon& d, std::uint32_t engine, const std::string& key) {
  return d.engine_number(engine, key);
}

}  // namespace

TEST_CASE("a client is placed on the engine it asks for, or on the least loaded") {
  Daemon d({"--engines", "2"});
  AttachOptions o;
  o.socket_path = d.socket();
  o.engine = 1;
  auto one = Client::attach(o);
  REQUIRE(one);
  CHECK(one.value->engine() == 1);
  o.engine = 0;
  auto zero = Client::attach(o);
  REQUIRE(zero);
  CHECK(zero.value->engine() == 0);
  o.engine = 5;  // this ferryd runs engines 0 and 1
  CHECK(Client::attach(o).status == Status::BadRequest);
  // Least loaded: engine 1 has 1 client, engine 0 has 1; a third asked for 1.
  o.engine = 1;
  auto third = Client::attach(o);
  REQUIRE(third);
  o.engine = -1;
  auto any = Client::attach(o);
  REQUIRE(any);
  CHECK(any.value->engine() == 0);
  // FERRY_ENGINE applies when the options name none.
  ::setenv("FERRY_ENGINE", "1", 1);
  auto by_env = Client::attach(o);
  ::unsetenv("FERRY_ENGINE");
  REQUIRE(by_env);
  CHECK(by_env.value->engine() == 1);
  CHECK(engine_number(d, 0, "clients") == 2);
  CHECK(engine_number(d, 1, "clients") == 3);
}

TEST_CASE("calls and sends cross engines in both directions with every byte checked") {
  Daemon d({"--engines", "2"});
  Gate rpc_ready, rpc_stop, sink_ready;
  // The RPC server on engine 0, the sink on engine 1.
  const pid_t server = spawn_on_engine(0, [&] { return run_rpc_server({d.socket()}, rpc_ready, rpc_stop); });
  SinkSpec sink{d.socket(), "sink", 2, 200};
  const pid_t sinker = spawn_on_engine(1, [&] { return run_sink(sink, sink_ready); });
  REQUIRE(rpc_ready.wait(10s));
  REQUIRE(sink_ready.wait(10s));
  std::vector<pid_t> clients;
  for (std::uint32_t i = 0; i < 2; ++i) {
    // Callers on engine 1 (to engine 0's server) and on engine 0 (same engine, for contrast).
    CallerSpec c;
    c.socket = d.socket();
    c.target = i == 0 ? "xform" : "echo";
    c.caller = i;
    c.count = 300;
    c.concurrency = 8;
    clients.push_back(spawn_on_engine(i == 0 ? 1 : 0, [c] { return run_caller(c); }));
    // Senders on engine 0 (to engine 1's sink) and on engine 1.
    SenderSpec s{d.socket(), "sink", i, 200, 8};
    clients.push_back(spawn_on_engine(i, [s] { return run_sender(s); }));
  }
  for (pid_t p : clients) CHECK(reap(p, 40s) == 0);
  CHECK(reap(sinker, 20s) == 0);
  rpc_stop.signal();
  CHECK(reap(server, 20s) == 0);
  // Both engines handed ops over and took completions back.
  CHECK(engine_number(d, 0, "cross_engine_out") > 300);
  CHECK(engine_number(d, 1, "cross_engine_out") > 300);
  CHECK(engine_number(d, 0, "cross_engine_in") > 300);
  CHECK(engine_number(d, 1, "cross_engine_in") > 300);
  CHECK(d.wait_clients(0, 5s));
}

TEST_CASE("every cross-engine call completes exactly once when the server on the other engine is killed") {
  Daemon d({"--engines", "2"});
  Gate rpc_ready, rpc_stop, go;
  const pid_t server = spawn_on_engine(1, [&] {
    RpcServerSpec s{d.socket()};
    return run_rpc_server(s, rpc_ready, rpc_stop);
  });
  REQUIRE(rpc_ready.wait(10s));
  // A caller on engine 0 keeps 16 calls in flight; each must end exactly
  // once, Ok before the kill and ServiceGone (or ServiceNotFound on a new
  // open) after it, never hang.
  const pid_t caller = spawn_on_engine(0, [&]() -> int {
    auto c = attach_retry(d.socket(), "caller");
    if (!c) return fail(1, "attach");
    if (c->engine() != 0) return fail(2, "placed on engine %u", c->engine());
    auto ep = open_retry(*c, "echo");
    if (!ep) return fail(3, "open echo");
    constexpr std::uint32_t kInFlight = 16, kLen = 512;
    std::vector<Buffer> req(kInFlight), resp(kInFlight);
    for (std::uint32_t i = 0; i < kInFlight; ++i) {
      req[i] = c->alloc(kLen);
      resp[i] = c->alloc(kLen);
    }
    std::map<std::uint64_t, int> done;  // user_data -> completions seen
    std::uint64_t next = 1, submitted = 0, ok = 0, gone = 0;
    auto submit = [&](std::uint32_t slot) {
      fill_payload(req[slot].data, kLen, slot, next);
      const std::uint64_t tag = next << 8 | slot;
      if (c->call(ep.value, req[slot], kLen, resp[slot], tag) != Status::Ok) return false;
      done[tag] = 0;
      ++next;
      ++submitted;
      return true;
    };
    for (std::uint32_t i = 0; i < kInFlight; ++i) {
      if (!submit(i)) return fail(4, "submit");
    }
    bool signalled = false, dead = false;
    const auto deadline = Clock::now() + 20s;
    std::uint64_t outstanding = kInFlight;
    while (outstanding != 0 && Clock::now() < deadline) {
      Completion got[32];
      const std::size_t n = c->wait(got, 100ms);
      for (std::size_t k = 0; k < n; ++k) {
        if (got[k].kind != Completion::Kind::OpDone || got[k].op != OpKind::Call) continue;
        auto it = done.find(got[k].user_data);
        if (it == done.end()) return fail(5, "completion for an unknown call");
        if (++it->second != 1) return fail(6, "a call completed twice");
        --outstanding;
        const auto slot = static_cast<std::uint32_t>(got[k].user_data & 0xFF);
        if (got[k].status == Status::Ok) {
          if (!check_payload(resp[slot].data, kLen, slot, got[k].user_data >> 8)) return fail(7, "bad echo");
          ++ok;
        } else if (got[k].status == Status::ServiceGone) {
          ++gone;
          dead = true;
        } else {
          return fail(8, "call ended %s", std::string(to_string(got[k].status)).c_str());
        }
        if (ok >= 200 && !signalled) {
          signalled = true;
          go.signal();  // the parent kills the server now
        }
        if (!dead && submit(slot)) ++outstanding;
      }
    }
    if (outstanding != 0) return fail(9, "%llu calls never completed", static_cast<unsigned long long>(outstanding));
    if (gone == 0) return fail(10, "no call saw the server die");
    return 0;
  });
  REQUIRE(go.wait(20s));
  ::kill(server, SIGKILL);
  reap(server, 5s);
  CHECK(reap(caller, 30s) == 0);
  CHECK(d.wait_clients(0, 5s));
}

TEST_CASE("a caller killed mid-traffic leaves the server on the other engine serving the rest") {
  Daemon d({"--engines", "2"});
  Gate rpc_ready, rpc_stop, progress;
  const pid_t server = spawn_on_engine(1, [&] { return run_rpc_server({d.socket()}, rpc_ready, rpc_stop); });
  REQUIRE(rpc_ready.wait(10s));
  CallerSpec victim;
  victim.socket = d.socket();
  victim.target = "echo";
  victim.caller = 1;
  victim.count = 1'000'000;  // killed long before
  victim.concurrency = 16;
  victim.progress = &progress;
  victim.progress_after = 100;
  const pid_t doomed = spawn_on_engine(0, [victim] { return run_caller(victim); });
  REQUIRE(progress.wait(20s));
  ::kill(doomed, SIGKILL);
  reap(doomed, 5s);
  CallerSpec after;
  after.socket = d.socket();
  after.target = "xform";
  after.caller = 2;
  after.count = 200;
  const pid_t survivor = spawn_on_engine(0, [after] { return run_caller(after); });
  CHECK(reap(survivor, 30s) == 0);
  rpc_stop.signal();
  CHECK(reap(server, 20s) == 0);
  CHECK(d.wait_clients(0, 5s));
}
