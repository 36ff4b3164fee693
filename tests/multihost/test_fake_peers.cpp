// Strangers at the peer port are not dead peers. 64
// processes' worth of connections each send a well-formed bootstrap Hello
// (a fresh epoch; with the secret's policy in force, a nonce but no way to
// prove it) and hang up once answered. The daemon must count them as
// refused bootstrap handshakes (peer_bootstrap_refusals) and leave
// peer_failures, which counts channels to real peers that failed, at 0.
// On a daemon without that distinction peer_failures rises with each one.
// The daemon's log stays bounded too: one line per 10 s for them, with a
// count, where each used to cost four.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

#include "tests/integration/traffic.h"
#include "tests/multihost/cluster.h"
#include "tests/multihost/fake_hello.h"
#include "tests/multihost/status_json.h"
#include "transport/wire/handshake.h"
#include "transport/wire/header.h"

using namespace ferry;
using namespace ferry::itest;
using namespace ferry::mhtest;

namespace {

constexpr int kFakes = 64;

std::uint64_t counter_of(const Node& n, const char* name) {
  const auto s = status_json(n);
  return s ? counter(*s, name) : ~std::uint64_t{0};
}

// One stranger: connects, sends a valid bootstrap Hello, reads until the
// daemon answered (or 2 s), then hangs up. Returns whether the Hello went.
bool fake_peer(std::uint16_t port, bool with_nonce, std::uint64_t epoch) {
  const int fd = send_fake_hello("127.0.0.1", port, FakeHello{.epoch = epoch, .with_nonce = with_nonce});
  if (fd < 0) return false;
  // The daemon answers (a Challenge with a secret, then the HelloAck); a
  // stranger cannot go on from there and leaves.
  (void)read_answers(fd, wire::kHeaderBytes + wire::kHandshakeNonceBytes, 2s);
  ::close(fd);
  return true;
}

void run(const std::vector<std::string>& extra, bool with_nonce) {
  DaemonFlags flags;
  flags.extra_args = extra;
  Cluster cl(1, NetMode::Loopback, flags);
  const Node& a = cl.node(0);
  std::mt19937_64 rng(12345);
  std::vector<std::thread> fakes;
  std::atomic<int> sent{0};
  std::uint64_t refused = 0;
  // Each stranger's channel ends when it hangs up (or at the handshake
  // deadline); waits until the daemon counted `n` of them.
  auto wait_refused = [&](std::uint64_t n) {
    const auto deadline = Clock::now() + 15s;
    while ((refused = counter_of(a, "peer_bootstrap_refusals")) < n && Clock::now() < deadline)
      std::this_thread::sleep_for(20ms);  // polling another process's counters with a deadline
  };
  for (int i = 0; i < kFakes; ++i) {
    const std::uint64_t epoch = rng() | 1;
    fakes.emplace_back([&, epoch] { sent += fake_peer(a.port, with_nonce, epoch) ? 1 : 0; });
    if (fakes.size() == 16) {
      // 16 at a time, each batch once the daemon has seen the last one
      // leave: always under the per-source cap of unauthenticated
      // connections, so every Hello is read (a batch that found the last
      // one still counted was refused at accept, Hellos unread).
      for (auto& t : fakes) t.join();
      fakes.clear();
      wait_refused(static_cast<std::uint64_t>(i + 1));
    }
  }
  for (auto& t : fakes) t.join();
  REQUIRE(sent.load() == kFakes);
  wait_refused(kFakes);
  INFO("log:\n" << cl.log_tail(0, 6000));
  CHECK(refused == static_cast<std::uint64_t>(kFakes));
  CHECK(counter_of(a, "peer_failures") == 0);
  CHECK(counter_of(a, "peer_connects") == 0);
  // Logging stays bounded: a line per 10 s for the strangers' Hellos, not
  // four per stranger (their channels' steps are debug lines).
  const std::string log = cl.log_tail(0, 1 << 20);
  std::size_t lines = 0;
  for (std::size_t at = log.find("channel "); at != std::string::npos; at = log.find("channel ", at + 1)) ++lines;
  CHECK(lines <= 4);
  CHECK(cl.alive(0));
}

}  // namespace

TEST_CASE("fake peers: valid Hellos from strangers without a secret are not peer failures") { run({}, false); }

TEST_CASE("fake peers: the same against a daemon with the shared secret") {
  char tmpl[] = "/tmp/ferry-fake-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string secret = dir + "/peer.secret";
  std::ofstream(secret) << "ferry-fake-peers-secret-0123456789\n";
  ::chmod(secret.c_str(), 0600);
  run({"--auth-secret-file", secret}, true);
  std::system(("rm -rf '" + dir + "'").c_str());
}
