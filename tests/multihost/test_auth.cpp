// Shared-secret authentication of daemons at channel bootstrap, with real
// ferryd processes: the same secret gives an Up channel and a working RPC;
// a wrong secret, or a secret on one side only, fails the Open with
// PermissionDenied within the connect timeout, both logs say
// "authentication failed" (and never show the secret), and the acceptor
// creates no endpoint or proxy for the refused peer. A secret that is too
// short is a start-up error. Each daemon is its own one-node Cluster so
// the two can run with different flags.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "base/json.h"
#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/peer_status.h"
#include "tests/multihost/roles.h"
#include "tests/multihost/status_json.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {

constexpr auto kSlack = 2000ms;
const std::string kSecretA = "ferry-test-secret-AAAAAAAAAAAAAAAA";
const std::string kSecretB = "ferry-test-secret-BBBBBBBBBBBBBBBB";

// A directory of secret files (mode 0600), removed at scope exit.
struct SecretDir {
  std::string dir;
  SecretDir() {
    char tmpl[] = "/tmp/ferry-auth-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
  }
  ~SecretDir() { std::system(("rm -rf '" + dir + "'").c_str()); }
  std::string write(const std::string& name, const std::string& content) const {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << content;
    ::chmod(path.c_str(), 0600);
    return path;
  }
};

DaemonFlags flags_with(const std::string& secret_file) {
  DaemonFlags f;
  f.connect_timeout_ms = 1000;
  if (!secret_file.empty()) f.extra_args = {"--auth-secret-file", secret_file};
  return f;
}

std::string st(Status s) { return std::string(to_string(s)); }

// A opens B's echo service once: the Open's status and how long it took.
std::pair<Status, std::chrono::milliseconds> open_from(const Cluster& a, const Node& b) {
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  const pid_t client = a.spawn_on(0, [&]() -> int {
    auto c = attach_retry(a.node(0).socket(), "auth");
    if (!c) return fail(1, "attach");
    const auto t0 = Clock::now();
    auto ep = c->open(b.target("echo"), 20s);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    const std::int64_t msg[2] = {static_cast<std::int64_t>(ep.status), took.count()};
    return ::write(pipefd[1], msg, sizeof msg) == sizeof msg ? 0 : 2;
  });
  ::close(pipefd[1]);
  std::int64_t msg[2] = {-1, -1};
  const bool got = ::read(pipefd[0], msg, sizeof msg) == sizeof msg;
  ::close(pipefd[0]);
  CHECK(reap(client, 30s) == 0);
  REQUIRE(got);
  return {static_cast<Status>(msg[0]), std::chrono::milliseconds(msg[1])};
}

// The refused cases: Open fails with PermissionDenied in bounded time, both
// sides log it, the acceptor made nothing for the peer, no secret in logs.
void check_refused(const std::string& secret_a, const std::string& secret_b) {
  SecretDir secrets;
  const std::string fa = secret_a.empty() ? "" : secrets.write("a.secret", secret_a + "\n");
  const std::string fb = secret_b.empty() ? "" : secrets.write("b.secret", secret_b + "\n");
  Cluster a(1, NetMode::Loopback, flags_with(fa));
  Cluster b(1, NetMode::Loopback, flags_with(fb));
  const Node& nb = b.node(0);
  INFO("A " << a.node(0).listen() << " secret " << (fa.empty() ? "none" : "yes") << ", B " << nb.listen() << " secret "
            << (fb.empty() ? "none" : "yes"));

  Gate ready, stop;
  const pid_t server = b.spawn_on(0, [&] { return run_rpc_server({nb.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));

  const auto [status, took] = open_from(a, nb);
  INFO("open: " << st(status) << " after " << took.count() << " ms");
  CHECK(status == Status::PermissionDenied);
  CHECK(took <= std::chrono::milliseconds(a.flags().connect_timeout_ms) + kSlack);

  CHECK(a.log_has(0, "authentication failed", 5s));
  CHECK(b.log_has(0, "authentication failed", 5s));
  INFO("A log:\n" << a.log_tail(0) << "\nB log:\n" << b.log_tail(0));
  for (const Cluster* cl : {&a, &b}) {
    const std::string log = cl->log_tail(0, 256 * 1024);
    CHECK(log.find("ferry-test-secret") == std::string::npos);
  }

  // The acceptor: no channel Up, no endpoint or proxy, the refusal counted.
  const auto sb = status_json(nb);
  REQUIRE(sb);
  CHECK(counter(*sb, "peer_connects") == 0);
  CHECK(counter(*sb, "peer_auth_failures") >= 1);
  const json::Value* peers = sb->find("peers");
  REQUIRE(peers != nullptr);
  REQUIRE(peers->as_array() != nullptr);
  for (const json::Value& p : *peers->as_array()) {
    const json::Value* state = p.find("state");
    const json::Value* eps = p.find("endpoints");
    CHECK((state != nullptr && state->as_string() != nullptr && *state->as_string() != "Up"));
    CHECK((eps != nullptr && eps->as_uint() == std::optional<std::uint64_t>(0)));
  }
  const auto sa = status_json(a.node(0));
  REQUIRE(sa);
  CHECK(counter(*sa, "peer_connects") == 0);
  CHECK(counter(*sa, "peer_auth_failures") >= 1);

  stop.signal();
  CHECK(reap(server, 10s) == 0);
  CHECK(a.alive(0));
  CHECK(b.alive(0));
}

}  // namespace

TEST_CASE("auth: the same secret on both daemons gives an Up channel and a working RPC") {
  SecretDir secrets;
  const std::string f = secrets.write("shared.secret", kSecretA + "\n");
  Cluster cl(2, NetMode::Loopback, flags_with(f));
  const Node& a = cl.node(0);
  const Node& b = cl.node(1);
  Gate ready, stop;
  const pid_t server = cl.spawn_on(1, [&] { return run_rpc_server({b.socket()}, ready, stop); });
  REQUIRE(ready.wait(10s));
  const pid_t client =
      cl.spawn_on(0, [&] { return open_and_echo(a.socket(), "auth", b.target("echo"), 10s, 3000, 5); });
  CHECK(reap(client, 30s) == 0);
  stop.signal();
  CHECK(reap(server, 10s) == 0);
  INFO("A log:\n" << cl.log_tail(0) << "\nB log:\n" << cl.log_tail(1));
  CHECK(cl.log_tail(0).find("peer authenticated") != std::string::npos);
  CHECK(cl.log_tail(0).find("authentication failed") == std::string::npos);
  CHECK(cl.log_tail(1).find("authentication failed") == std::string::npos);
  std::optional<StatusView> sb;
  const Error polled = poll_status(
      b.control(), 5s, [](const StatusView& s) { return !s.peers.empty() && s.peers[0].state == "Up"; }, &sb);
  INFO(polled.message());
  INFO("B: " << (sb ? describe(*sb) : std::string("no status")));
  CHECK(polled.ok());
}

TEST_CASE("auth: a wrong secret refuses the channel on both sides") { check_refused(kSecretA, kSecretB); }

TEST_CASE("auth: a secret on the initiator only is refused") { check_refused(kSecretA, ""); }

TEST_CASE("auth: a secret on the acceptor only is refused") { check_refused("", kSecretB); }

TEST_CASE("auth: a secret shorter than 16 bytes is a start-up error") {
  const char* ferryd = std::getenv("FERRYD");
  REQUIRE(ferryd != nullptr);
  SecretDir secrets;
  const std::string f = secrets.write("short.secret", "fifteen-bytes!!\n");  // 15 after the trim
  const std::string cmd =
      std::string(ferryd) + " --check-config --runtime-dir '" + secrets.dir + "' --auth-secret-file '" + f + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, got);
  const int rc = ::pclose(p);
  INFO(out);
  CHECK(WIFEXITED(rc));
  CHECK(WEXITSTATUS(rc) == 2);
  CHECK(out.find("auth-secret-file") != std::string::npos);
  CHECK(out.find("at least 16") != std::string::npos);
  CHECK(out.find("fifteen") == std::string::npos);  // the secret is never printed
  // Sixteen bytes are enough.
  const std::string ok = secrets.write("ok.secret", "sixteen-bytes!!!\n");
  const std::string cmd_ok = std::string(ferryd) + " --check-config --runtime-dir '" + secrets.dir +
                             "' --auth-secret-file '" + ok + "' >/dev/null 2>&1";
  CHECK(std::system(cmd_ok.c_str()) == 0);
}
