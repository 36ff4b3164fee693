// SPSC ring across two real processes sharing MAP_SHARED memory: millions of
// self-checking entries arrive complete and in order, and the doorbell sleep
// protocol never loses a wake-up.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "ring_stress_loops.h"

using namespace ferry::shm;
using namespace ferry::shm::test;

namespace {

struct PairResult {
  ProducerReport producer;
  ConsumerReport consumer;
  bool report_read = false;
  int child_status = -1;
};

// Parent produces, forked child consumes and sends its report over a pipe.
template <std::uint32_t Capacity>
PairResult run_pair(std::uint64_t count, bool with_doorbell, std::chrono::seconds budget) {
  PairResult res;
  SharedRingRegion<Capacity> region;
  REQUIRE(region.ok());
  Doorbell bell;
  if (with_doorbell) {
    auto b = Doorbell::create();
    REQUIRE(b);
    bell = std::move(b.value);
  }
  const Doorbell* bell_ptr = with_doorbell ? &bell : nullptr;
  int report_pipe[2];
  REQUIRE(::pipe(report_pipe) == 0);
  const auto deadline = Clock::now() + budget;

  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(report_pipe[0]);
    const ConsumerReport rep = consume(region.get(), count, bell_ptr, deadline);
    const bool sent = ::write(report_pipe[1], &rep, sizeof rep) == static_cast<ssize_t>(sizeof rep);
    ::_exit(sent ? 0 : 1);
  }
  ::close(report_pipe[1]);

  int status = 0;
  bool reaped = false;
  res.producer = produce(region.get(), count, bell_ptr, deadline, [&] {
    reaped = ::waitpid(child, &status, WNOHANG) == child;
    return !reaped;
  });

  // The child's own deadline bounds it; this loop only guards against a
  // child that wedges outside its loop.
  while (!reaped) {
    const pid_t w = ::waitpid(child, &status, WNOHANG);
    if (w == child) {
      reaped = true;
    } else if (Clock::now() > deadline + std::chrono::seconds(5)) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      reaped = true;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  res.child_status = status;
  res.report_read =
      ::read(report_pipe[0], &res.consumer, sizeof res.consumer) == static_cast<ssize_t>(sizeof res.consumer);
  ::close(report_pipe[0]);
  return res;
}

void check(const PairResult& r, std::uint64_t count) {
  CAPTURE(r.producer.sent, r.producer.rings, r.consumer.received, r.consumer.bad_entries, r.consumer.first_bad_seq,
          r.consumer.sleeps, r.consumer.lost_wakeups, r.consumer.idle_timeouts, r.consumer.deadline_passed);
  REQUIRE(WIFEXITED(r.child_status));
  REQUIRE(WEXITSTATUS(r.child_status) == 0);
  REQUIRE(r.report_read);
  REQUIRE_FALSE(r.producer.deadline_passed);
  REQUIRE_FALSE(r.producer.peer_died);
  REQUIRE(r.producer.sent == count);
  REQUIRE_FALSE(r.consumer.corrupt);
  REQUIRE_FALSE(r.consumer.deadline_passed);
  REQUIRE(r.consumer.lost_wakeups == 0);
  REQUIRE(r.consumer.bad_entries == 0);
  REQUIRE(r.consumer.received == count);
}

}  // namespace

TEST_CASE("ring carries millions of entries between two processes", "[ring][stress]") {
  constexpr std::uint64_t kCount = 4'000'000 / kStressDivisor;
  const PairResult r = run_pair<1024>(kCount, false, std::chrono::seconds(60));
  check(r, kCount);
}

TEST_CASE("doorbell sleep protocol loses no wake-up between two processes", "[ring][stress][doorbell]") {
  constexpr std::uint64_t kCount = 1'000'000 / kStressDivisor;
  const PairResult r = run_pair<256>(kCount, true, std::chrono::seconds(60));
  check(r, kCount);
  // The run must actually have exercised the sleep path.
  REQUIRE(r.consumer.sleeps > 10);
  REQUIRE(r.producer.rings > 10);
}
