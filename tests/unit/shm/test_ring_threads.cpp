// The same SPSC ring stress as test_ring_stress, with producer and consumer
// as threads of one process so ThreadSanitizer can watch every access
// (scripts run it in a -Db_sanitize=thread build).
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <thread>

#include "ring_stress_loops.h"

using namespace ferry::shm;
using namespace ferry::shm::test;

namespace {

template <std::uint32_t Capacity>
void run_threads(std::uint64_t count, bool with_doorbell) {
  auto ring = std::make_unique<SharedRing<Capacity>>();
  ring_init(&ring->header);
  Doorbell bell;
  if (with_doorbell) bell = std::move(Doorbell::create().value);
  const Doorbell* bell_ptr = with_doorbell ? &bell : nullptr;
  const auto deadline = Clock::now() + std::chrono::seconds(90);

  ConsumerReport c;
  std::atomic<bool> consumer_done{false};
  std::thread consumer([&] {
    c = consume(ring.get(), count, bell_ptr, deadline);
    consumer_done.store(true, std::memory_order_release);
  });
  const ProducerReport p =
      produce(ring.get(), count, bell_ptr, deadline, [&] { return !consumer_done.load(std::memory_order_acquire); });
  consumer.join();

  CAPTURE(p.sent, p.rings, c.received, c.bad_entries, c.first_bad_seq, c.sleeps, c.lost_wakeups, c.idle_timeouts);
  REQUIRE_FALSE(p.deadline_passed);
  REQUIRE(p.sent == count);
  REQUIRE_FALSE(c.corrupt);
  REQUIRE_FALSE(c.deadline_passed);
  REQUIRE(c.lost_wakeups == 0);
  REQUIRE(c.bad_entries == 0);
  REQUIRE(c.received == count);
  if (with_doorbell) REQUIRE(c.sleeps > 0);
}

}  // namespace

TEST_CASE("ring between two threads, spinning", "[ring][threads]") {
  run_threads<512>(1'000'000 / kStressDivisor, false);
}

TEST_CASE("ring between two threads, sleeping on the doorbell", "[ring][threads][doorbell]") {
  run_threads<128>(1'000'000 / kStressDivisor, true);
}
