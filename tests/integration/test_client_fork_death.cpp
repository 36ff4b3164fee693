// Two ways a client used to be misled.
//
// A process attaches, forks, and the child uses the inherited Client: the
// child must be refused (Forked) before it touches the rings it shares
// with the parent, may attach a Client of its own, and the parent's calls
// must go on working. On a build without the fork check the child's call
// succeeds through the parent's rings, the parent then drops completions it
// never submitted and its later calls fail.
//
// ferryd dies while a client neither polls nor waits: state() alone must
// say DaemonGone within 100 ms (the old client said Ok until its next
// poll).
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/integration/traffic.h"

using namespace ferry;
using namespace ferry::itest;

namespace {

const char* st(Status s) { return to_string(s).data(); }

// A checked echo call of `len` bytes with pattern `seed`.
int echo(Client& c, EndpointId ep, std::uint64_t seed, std::uint64_t tag) {
  constexpr std::uint32_t kLen = 512;
  Buffer req = c.alloc(kLen), resp = c.alloc(kLen);
  if (!req || !resp) return fail(40, "alloc");
  fill_payload(req.data, kLen, static_cast<std::uint32_t>(seed), 0);
  const Completion r = call_once(c, ep, req, kLen, resp, tag);
  const bool ok =
      r.status == Status::Ok && r.length == kLen && check_payload(resp.data, kLen, static_cast<std::uint32_t>(seed), 0);
  (void)c.free(req);
  (void)c.free(resp);
  return ok ? 0 : fail(41, "echo %llu: %s (length %u)", static_cast<unsigned long long>(tag), st(r.status), r.length);
}

// The child of fork(): every use of the inherited client is refused; its own attach works.
int forked_child(Client& inherited, EndpointId ep, const std::string& socket) {
  Buffer none = inherited.alloc(64);
  if (none) return fail(10, "alloc in the child returned a buffer of the parent's arena");
  Buffer b{};
  if (Status s = inherited.call(ep, b, 0, b, 1); s != Status::Forked) return fail(11, "call in the child: %s", st(s));
  if (Status s = inherited.send(ep, b, 0, 2); s != Status::Forked) return fail(12, "send in the child: %s", st(s));
  if (auto r = inherited.open("echo"); r.status != Status::Forked) return fail(13, "open: %s", st(r.status));
  if (inherited.state() != Status::Forked) return fail(14, "state in the child: %s", st(inherited.state()));
  Completion out[8];
  if (inherited.poll(out) != 0 || inherited.wait(out, 50ms) != 0) return fail(15, "completions in the child");
  auto own = attach_retry(socket, "fork-child");
  if (!own) return fail(16, "the child's own attach");
  auto own_ep = open_retry(*own, "echo");
  if (!own_ep) return fail(17, "the child's own open: %s", st(own_ep.status));
  for (std::uint64_t i = 0; i < 50; ++i)
    if (int rc = echo(*own, own_ep.value, 100 + i, i); rc != 0) return rc;
  inherited.detach();  // allowed: closes the child's copy of the socket only
  return 0;
}

}  // namespace

TEST_CASE("a forked child cannot use its parent's client; the parent goes on") {
  Daemon d;
  Gate ready, stop;
  const pid_t server = spawn([&] { return run_rpc_server(RpcServerSpec{d.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));
  const std::string sock = d.socket();
  const pid_t parent = spawn([&, sock]() -> int {
    auto c = attach_retry(sock, "fork-parent");
    if (!c) return fail(1, "attach");
    auto ep = open_retry(*c, "echo");
    if (!ep) return fail(2, "open: %s", st(ep.status));
    if (int rc = echo(*c, ep.value, 1, 1); rc != 0) return rc;
    const pid_t child = ::fork();
    if (child == 0) ::_exit(forked_child(*c, ep.value, sock));
    if (child < 0) return fail(3, "fork");
    // The parent keeps calling while the child runs, and after it is gone.
    for (std::uint64_t i = 0; i < 200; ++i)
      if (int rc = echo(*c, ep.value, 1000 + i, 10 + i); rc != 0) return rc;
    const int child_rc = reap(child, 20s);
    if (child_rc != 0) return fail(4, "the forked child failed (%d)", child_rc);
    for (std::uint64_t i = 0; i < 200; ++i)
      if (int rc = echo(*c, ep.value, 5000 + i, 1000 + i); rc != 0) return rc;
    if (c->state() != Status::Ok) return fail(5, "parent state %s", st(c->state()));
    if (c->stats().dropped_completions != 0) return fail(6, "the parent dropped completions");
    return 0;
  });
  CHECK(reap(parent, 60s) == 0);
  stop.signal();
  CHECK(reap(server, 10s) == 0);
  CHECK(d.alive());
}

TEST_CASE("state() sees ferryd's death within 100 ms without a poll") {
  auto d = std::make_unique<Daemon>();
  const std::string sock = d->socket();
  Gate attached, killed;
  const pid_t client = spawn([&, sock]() -> int {
    auto c = attach_retry(sock, "never-polls");
    if (!c) return fail(1, "attach");
    if (c->state() != Status::Ok) return fail(2, "state before: %s", st(c->state()));
    attached.signal();
    if (!killed.wait(20s)) return fail(3, "never told the daemon died");
    // The daemon is dead and reaped: its end of the socket is closed.
    const auto t0 = Clock::now();
    Status s = c->state();
    while (s == Status::Ok && Clock::now() - t0 < 2s) s = c->state();  // a reader that never polls
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    if (s != Status::DaemonGone) return fail(4, "state %s after %lld ms", st(s), static_cast<long long>(took.count()));
    if (took > 100ms) return fail(5, "DaemonGone only after %lld ms", static_cast<long long>(took.count()));
    return 0;
  });
  REQUIRE(attached.wait(10s));
  d->kill_hard();
  killed.signal();
  CHECK(reap(client, 20s) == 0);
}
