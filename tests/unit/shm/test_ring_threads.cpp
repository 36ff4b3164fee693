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

// Records (an entry and its bytes, published at once) of every size from
// 0 to 3 slots through a small ring: the consumer reads each entry, then
// exactly its bytes, and checks both; the producer's cached view of the
// consumer's tail (RingProducer::has_room) is what keeps it from
// overwriting bytes not yet read.
TEST_CASE("records between two threads: every entry and its bytes intact", "[ring][threads]") {
  constexpr std::uint32_t kCap = 16;
  constexpr std::uint32_t kMaxBytes = 3 * sizeof(TestEntry);
  const std::uint64_t count = 400'000 / kStressDivisor;
  auto ring = std::make_unique<SharedRing<kCap>>();
  ring_init(&ring->header);
  const auto deadline = Clock::now() + std::chrono::seconds(90);
  auto byte_of = [](std::uint64_t seq, std::uint32_t i) { return static_cast<std::byte>((seq * 31 + i * 7) & 0xff); };
  auto size_of = [](std::uint64_t seq) { return static_cast<std::uint32_t>((seq * 37) % (kMaxBytes + 1)); };

  std::uint64_t received = 0, bad = 0;
  bool consumer_late = false;
  std::thread consumer([&] {
    RingConsumer<TestEntry> cons(&ring->header, ring->entries, kCap);
    std::byte bytes[kMaxBytes];
    while (received < count) {
      if (Clock::now() > deadline) {
        consumer_late = true;
        return;
      }
      TestEntry e;
      if (cons.pop_batch(&e, 1) == 0) {
        std::this_thread::yield();
        continue;
      }
      const std::uint32_t n = size_of(received);
      // Published with its entry: the bytes are there at once.
      if (!entry_ok(e, received) || !cons.pop_bytes(bytes, n)) {
        ++bad;
        return;
      }
      for (std::uint32_t i = 0; i < n; ++i) bad += bytes[i] == byte_of(received, i) ? 0 : 1;
      ++received;
    }
  });
  RingProducer<TestEntry> prod(&ring->header, ring->entries, kCap);
  std::byte bytes[kMaxBytes];
  std::uint64_t sent = 0;
  bool producer_late = false;
  while (sent < count) {
    const std::uint32_t n = size_of(sent);
    for (std::uint32_t i = 0; i < n; ++i) bytes[i] = byte_of(sent, i);
    if (prod.try_push_record(make_entry(sent), bytes, n)) {
      ++sent;
    } else if (Clock::now() > deadline) {
      producer_late = true;
      break;
    } else {
      std::this_thread::yield();
    }
  }
  consumer.join();
  CAPTURE(sent, received, bad);
  REQUIRE_FALSE(producer_late);
  REQUIRE_FALSE(consumer_late);
  REQUIRE(bad == 0);
  REQUIRE(received == count);
}
