// Hostile doorbells: a client owns one end of each of its two
// doorbells and may do anything to it. Clearing O_NONBLOCK on its SQ
// doorbell and ringing, or saturating its CQ doorbell and leaving it
// blocking, once froze the whole daemon (a read or write that never
// returned on the engine thread). Each case: the hostile client does it
// while the engine sleeps, then a well-behaved client must still get its
// traffic through within a bound, and SIGTERM must still stop the daemon.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <thread>

#include "tests/integration/harness.h"
#include "tests/integration/raw_client.h"

using namespace ferry;
using namespace ferry::itest;

namespace {

shm::SqEntry nop(std::uint64_t ud) {
  shm::SqEntry e{};
  e.op = static_cast<std::uint8_t>(shm::Op::Nop);
  e.user_data = ud;
  return e;
}

void clear_nonblock(int fd) { REQUIRE(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0); }

// A well-behaved client in its own process: serves a service, sends itself
// `n` messages and gets each delivery and OpDone, all within 5 s.
int well_behaved(const std::string& socket, int n) {
  auto c = attach_retry(socket, "well-behaved", 5s);
  if (!c) return fail(1, "attach");
  auto svc = c->serve("live", 5s);
  if (!svc) return fail(2, "serve: %s", to_string(svc.status).data());
  auto ep = c->open("live", 5s);
  if (!ep) return fail(3, "open: %s", to_string(ep.status).data());
  Buffer b = c->alloc(64);
  const auto deadline = Clock::now() + 5s;
  for (int i = 0; i < n; ++i) {
    std::memset(b.data, i, 64);
    if (c->send(ep.value, b, 64, static_cast<std::uint64_t>(i) + 1) != Status::Ok) return fail(4, "send %d", i);
    bool delivered = false, done = false;
    while (!(delivered && done)) {
      if (Clock::now() > deadline) return fail(5, "message %d: no %s in time", i, delivered ? "OpDone" : "delivery");
      Completion out[4];
      const std::size_t got = c->wait(out, 100ms);
      for (std::size_t k = 0; k < got; ++k) {
        if (out[k].kind == Completion::Kind::Message) {
          delivered = true;
          c->release(out[k]);
        } else if (out[k].kind == Completion::Kind::OpDone) {
          if (out[k].status != Status::Ok) return fail(6, "send %d: %s", i, to_string(out[k].status).data());
          done = true;
        }
      }
    }
  }
  return 0;
}

void check_daemon_serves_and_stops(Daemon& d) {
  const pid_t p = spawn([&] { return well_behaved(d.socket(), 20); });
  REQUIRE(reap(p, 8s) == 0);
  REQUIRE(::kill(d.pid(), SIGTERM) == 0);
  const auto deadline = Clock::now() + 5s;
  while (d.alive() && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  REQUIRE_FALSE(d.alive());
}

// Lets the engine finish its spin and go to sleep on the doorbells.
void let_engine_sleep() { std::this_thread::sleep_for(200ms); }

}  // namespace

TEST_CASE("a client that makes its SQ doorbell blocking and rings it does not freeze the daemon", "[hostile]") {
  Daemon d;
  RawClient r(d.socket(), "blocking-sq");
  REQUIRE(r.ok());
  clear_nonblock(r.sq_bell_fd());
  let_engine_sleep();
  r.ring_sq();  // once: the old engine read it, then read again and blocked
  REQUIRE(r.submit(nop(1)));
  r.ring_sq();
  shm::CqEntry out[4];
  std::uint32_t got = 0;
  for (int i = 0; i < 30 && got == 0; ++i) got = r.reap(out, 4, 100);
  REQUIRE(got == 1);  // its own Nop is answered too
  check_daemon_serves_and_stops(d);
}

TEST_CASE("a client that saturates its CQ doorbell and makes it blocking does not freeze the daemon", "[hostile]") {
  Daemon d;
  RawClient r(d.socket(), "saturated-cq");
  REQUIRE(r.ok());
  // An eventfd at its maximum makes the next ring wait for a reader. (The
  // daemon now hands out the read end of a pipe: writing fails, harmlessly.)
  const std::uint64_t max = 0xfffffffffffffffeull;
  [[maybe_unused]] const ssize_t w = ::write(r.cq_bell_fd(), &max, sizeof max);
  clear_nonblock(r.cq_bell_fd());
  let_engine_sleep();
  REQUIRE(r.cq().prepare_to_sleep());  // asks for a ring on the next completion
  REQUIRE(r.submit(nop(1)));
  r.ring_sq();
  std::this_thread::sleep_for(100ms);
  // Never drained: thousands of rings fill whatever the doorbell is.
  for (std::uint64_t i = 2; i < 12'000; ++i) {
    shm::CqEntry out[64];
    while (r.cq().pop_batch(out, 64) != 0) {
    }
    (void)r.cq().prepare_to_sleep();
    REQUIRE(r.submit(nop(i)));
  }
  check_daemon_serves_and_stops(d);
}
