// (b) Multi-process RPC: "echo" and "xform" served by one process, several
// callers with calls outstanding and mixed sizes up to 1 MiB, responses
// checked byte for byte in the caller's buffers; plus the error statuses a
// caller must see (ResponseTooLarge, ServiceNotFound, EndpointClosed).
#include <catch2/catch.hpp>
#include <cstring>

#include "tests/integration/traffic.h"

using namespace ferry;
using namespace ferry::itest;

TEST_CASE("callers with several calls outstanding get verified responses") {
  Daemon d;
  Gate ready, stop;
  const pid_t server = spawn([&] { return run_rpc_server({d.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));
  pid_t callers[4];
  for (std::uint32_t i = 0; i < 4; ++i) {
    CallerSpec s;
    s.socket = d.socket();
    s.target = i % 2 ? "echo" : "xform";
    s.caller = i;
    s.count = 120;
    s.concurrency = 6;
    callers[i] = spawn([s] { return run_caller(s); });
  }
  for (pid_t p : callers) CHECK(reap(p, 40s) == 0);

  // Error paths, from a client in its own process.
  const pid_t errors = spawn([&]() -> int {
    auto c = attach_retry(d.socket(), "errors");
    if (!c) return fail(1, "attach");
    auto missing = c->open("no-such-service");
    if (missing.status != Status::ServiceNotFound)
      return fail(2, "open missing: %s", std::string(to_string(missing.status)).c_str());
    auto ep = c->open("echo");
    if (!ep) return fail(3, "open echo");
    Buffer req = c->alloc(5000), small = c->alloc(100);
    fill_payload(req.data, 5000, 9, 1);
    std::memset(small.data, 0, small.capacity);
    Completion r = call_once(*c, ep.value, req, 5000, small, 7);
    if (r.status != Status::ResponseTooLarge)
      return fail(4, "small buffer: %s", std::string(to_string(r.status)).c_str());
    if (r.length != 5000) return fail(5, "ResponseTooLarge length %u, want 5000", r.length);
    for (std::uint32_t i = 0; i < small.capacity; ++i) {
      if (small.data[i] != std::byte{0}) return fail(6, "ResponseTooLarge wrote into the buffer");
    }
    Buffer big = c->alloc(5000);
    r = call_once(*c, ep.value, req, 5000, big, 7);
    if (r.status != Status::Ok || !check_payload(big.data, 5000, 9, 1)) return fail(7, "echo after ResponseTooLarge");
    if (c->close(ep.value) != Status::Ok) return fail(8, "close");
    r = call_once(*c, ep.value, req, 5000, big, 7);
    if (r.status != Status::EndpointClosed)
      return fail(9, "call after close: %s", std::string(to_string(r.status)).c_str());
    if (c->close(ep.value) != Status::EndpointClosed) return fail(10, "double close");
    return 0;
  });
  CHECK(reap(errors, 20s) == 0);
  stop.signal();
  CHECK(reap(server, 10s) == 0);
  CHECK(d.alive());
}

namespace {

// A server holding one call past its timeout (see traffic_timeout.cpp).
void held_call_times_out(const Daemon& d, std::chrono::milliseconds timeout, std::chrono::milliseconds expect) {
  Gate ready, release, late_done, stop, timed_out;
  const pid_t server =
      spawn([&] { return run_late_server(LateServerSpec{d.socket()}, ready, release, late_done, stop); });
  REQUIRE(ready.wait(10s));
  TimeoutCallerSpec spec;
  spec.socket = d.socket();
  spec.timeout = timeout;
  spec.expect_ms = expect;
  const pid_t caller = spawn([&] { return run_timeout_caller(spec, timed_out, late_done); });
  CHECK(timed_out.wait(30s));
  release.signal();  // only now does the server reply
  CHECK(reap(caller, 30s) == 0);
  stop.signal();
  CHECK(reap(server, 10s) == 0);
}

}  // namespace

TEST_CASE("a call held past its own timeout completes Timeout; the late reply gets CallerGone") {
  Daemon d;
  held_call_times_out(d, 300ms, 300ms);
  CHECK(d.alive());
}

TEST_CASE("without its own timeout a call gets the daemon's call-timeout-ms") {
  Daemon d({"--call-timeout-ms", "400"});
  held_call_times_out(d, 0ms, 400ms);
  CHECK(d.alive());
}
