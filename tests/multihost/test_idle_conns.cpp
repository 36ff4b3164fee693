// Idle TCP connections to a daemon's --listen port must not cut it off
// from its peers. This process opens 80 connections to
// A's peer port from 127.0.0.1 (the address B dials from too, the hardest
// case for a per-source limit) and never sends a byte. While they are held,
// Opens and calls in both directions between A and B succeed, with and
// without the shared secret; every idle connection is closed by A within
// peer-hello-timeout-ms (plus slack), 8 more from 127.0.0.2 by that
// deadline itself, and A's status counts what it did.
// On a daemon without the accept limits the idle connections take all 64
// slots of the tcp transport: A can neither accept B nor dial it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "base/json.h"
#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/status_json.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {

constexpr int kIdle = 80;
constexpr int kQuiet = 8;
constexpr std::uint32_t kHelloTimeoutMs = 2000;  // peer-hello-timeout-ms's default

std::string st(Status s) { return std::string(to_string(s)); }

// Connections that connect and then say nothing.
struct IdleConns {
  std::vector<int> fds;
  // From `source` (a loopback address) when given.
  IdleConns(std::uint16_t port, int n, const char* source = nullptr) {
    for (int i = 0; i < n; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      REQUIRE(fd >= 0);
      if (source != nullptr) {
        sockaddr_in from{};
        from.sin_family = AF_INET;
        REQUIRE(::inet_pton(AF_INET, source, &from.sin_addr) == 1);
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
      }
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(port);
      sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      // Loopback completes the handshake in the kernel, accepted or not.
      REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
      fds.push_back(fd);
    }
  }
  ~IdleConns() {
    for (int fd : fds) ::close(fd);
  }
  // How many the daemon closed (EOF or reset), waiting at most `within`.
  int closed_by_peer(std::chrono::milliseconds within) const {
    const auto deadline = Clock::now() + within;
    int closed = 0;
    std::vector<bool> done(fds.size(), false);
    while (closed < static_cast<int>(fds.size()) && Clock::now() < deadline) {
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if (done[i]) continue;
        pollfd p{fds[i], POLLIN, 0};
        if (::poll(&p, 1, 0) != 1) continue;
        char buf[512];  // with a secret the daemon sends a Challenge first: read past it
        const ssize_t r = ::recv(fds[i], buf, sizeof buf, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
          done[i] = true;
          ++closed;
        }
      }
      std::this_thread::sleep_for(20ms);  // polling sockets with a deadline
    }
    return closed;
  }
};

// From node `from` of `cl`: opens `target` and makes one verified call.
int open_and_call(const Cluster& cl, std::size_t from, const std::string& target) {
  auto c = attach_retry(cl.node(from).socket(), "idle");
  if (!c) return fail(1, "attach");
  auto ep = c->open(target, 8s);
  if (!ep) return fail(2, "open %s: %s", target.c_str(), st(ep.status).c_str());
  Buffer req = c->alloc(2000), resp = c->alloc(2000);
  fill_payload(req.data, 2000, 7, 1);
  const Completion r = call_once(*c, ep.value, req, 2000, resp, 1);
  if (r.status != Status::Ok || r.length != 2000 || !check_payload(resp.data, 2000, 7, 1))
    return fail(3, "echo: %s", st(r.status).c_str());
  return 0;
}

void run(const std::vector<std::string>& extra) {
  DaemonFlags flags;
  flags.connect_timeout_ms = 1000;
  flags.extra_args = extra;  // peer-hello-timeout-ms keeps its default
  Cluster cl(2, NetMode::Loopback, flags);
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  INFO("A " << a.listen() << ", B " << b.listen());

  Gate ready_a, stop_a, ready_b, stop_b;
  const pid_t server_a = cl.spawn_on(0, [&] { return run_rpc_server({a.socket()}, ready_a, stop_a); });
  const pid_t server_b = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready_b, stop_b); });
  REQUIRE(ready_a.wait(10s));
  REQUIRE(ready_b.wait(10s));

  const auto t0 = Clock::now();
  IdleConns idle(a.port, kIdle);
  // A few from another address, under its per-source cap: nothing evicts
  // them, the first-message deadline must close them.
  IdleConns quiet(a.port, kQuiet, "127.0.0.2");
  std::this_thread::sleep_for(200ms);  // A accepts them (or not) meanwhile

  // Both directions while the idle connections are held: B dials A (B's
  // connections arrive at the flooded listener), A dials B (A's slots).
  const pid_t b_to_a = cl.spawn_on(1, [&] { return open_and_call(cl, 1, a.target("echo")); });
  const pid_t a_to_b = cl.spawn_on(0, [&] { return open_and_call(cl, 0, b.target("echo")); });
  const int rc_ba = reap(b_to_a, 30s);
  const int rc_ab = reap(a_to_b, 30s);
  INFO("A log:\n" << cl.log_tail(0, 6000) << "\nB log:\n" << cl.log_tail(1, 3000));
  CHECK(rc_ba == 0);
  CHECK(rc_ab == 0);

  // Every idle connection is closed: at accept, for a newer one, or at its deadline.
  const auto budget = std::chrono::milliseconds(kHelloTimeoutMs) + 4s - (Clock::now() - t0);
  const int closed = idle.closed_by_peer(std::chrono::duration_cast<std::chrono::milliseconds>(budget));
  CHECK(closed == kIdle);
  // The quiet ones' deadlines run from their own accepts, which a loaded
  // machine may have made late: the same budget from t0, at least 1 s.
  const auto quiet_budget = std::max<std::chrono::milliseconds>(
      1s, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::milliseconds(kHelloTimeoutMs) + 4s -
                                                                (Clock::now() - t0)));
  const int quiet_closed = quiet.closed_by_peer(quiet_budget);
  CHECK(quiet_closed == kQuiet);
  const auto took = Clock::now() - t0;
  CHECK(took >= std::chrono::milliseconds(kHelloTimeoutMs));  // by the deadline, not at once

  const auto sa = status_json(a);
  REQUIRE(sa);
  const std::uint64_t refused = counter(*sa, "peer_accepts_refused");
  const std::uint64_t evicted = counter(*sa, "peer_accepts_evicted");
  const std::uint64_t timed_out = counter(*sa, "peer_hello_timeouts");
  INFO("refused " << refused << ", evicted " << evicted << ", timed out " << timed_out);
  CHECK(timed_out >= static_cast<std::uint64_t>(kQuiet));
  CHECK(refused + evicted + timed_out >= static_cast<std::uint64_t>(kIdle + kQuiet));
  CHECK(cl.log_tail(0, 64 * 1024).find("peer listener:") != std::string::npos);

  stop_a.signal();
  stop_b.signal();
  CHECK(reap(server_a, 10s) == 0);
  CHECK(reap(server_b, 10s) == 0);
  CHECK(cl.alive(0));
  CHECK(cl.alive(1));
}

}  // namespace

TEST_CASE("idle connections: 80 held to A's peer port; opens both ways succeed, the idle ones are closed") { run({}); }

TEST_CASE("idle connections: the same with the shared secret") {
  char tmpl[] = "/tmp/ferry-idle-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string secret = dir + "/peer.secret";
  std::ofstream(secret) << "ferry-idle-test-secret-0123456789\n";
  ::chmod(secret.c_str(), 0600);
  run({"--auth-secret-file", secret});
  std::system(("rm -rf '" + dir + "'").c_str());
}
