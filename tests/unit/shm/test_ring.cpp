// SPSC ring semantics in one thread: wrap-around (including the uint32 index
// wrap), full/empty, batches, hostile indices from the peer, and the
// doorbell sleep protocol step by step.
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "ring_test_util.h"
#include "shm/doorbell.h"

using namespace ferry::shm;
using namespace ferry::shm::test;

namespace {

constexpr std::uint32_t kCap = 64;

// A ring whose shared indices start at `start` (as if it had run a while).
struct TestRing {
  explicit TestRing(std::uint32_t start = 0) : r(std::make_unique<SharedRing<kCap>>()) {
    ring_init(&r->header);
    r->header.head.store(start);
    r->header.tail.store(start);
    prod = RingProducer<TestEntry>(&r->header, r->entries, kCap);
    cons = RingConsumer<TestEntry>(&r->header, r->entries, kCap);
  }
  std::unique_ptr<SharedRing<kCap>> r;
  RingProducer<TestEntry> prod;
  RingConsumer<TestEntry> cons;
};

}  // namespace

TEST_CASE("ring wraps around, across the uint32 index wrap too", "[ring]") {
  const std::uint32_t start = GENERATE(0u, 0xFFFFFFF0u, 0xFFFFFF00u, 0x7FFFFFF0u);
  CAPTURE(start);
  TestRing t(start);
  std::mt19937 rng(start);
  std::uint64_t pushed = 0, popped = 0, bad = 0;
  std::vector<TestEntry> in(kCap), out(kCap);
  for (std::uint64_t cycle = 0; cycle < 20000 / kStressDivisor; ++cycle) {
    const std::uint32_t want = 1 + rng() % kCap;
    for (std::uint32_t i = 0; i < want; ++i) in[i] = make_entry(pushed + i);
    const std::uint32_t room = t.prod.free_slots();
    REQUIRE(room == kCap - (pushed - popped));
    const std::uint32_t n = t.prod.push_batch(in.data(), want);
    REQUIRE(n == std::min(want, room));
    pushed += n;
    REQUIRE(t.cons.ready() == pushed - popped);
    const std::uint32_t m = t.cons.pop_batch(out.data(), 1 + rng() % kCap);
    // Counted, not REQUIREd per entry: keeps sanitizer builds fast.
    for (std::uint32_t i = 0; i < m; ++i) bad += entry_ok(out[i], popped + i) ? 0 : 1;
    popped += m;
    REQUIRE_FALSE(t.cons.corrupt());
  }
  REQUIRE(bad == 0);
  // Drain and check the published indices moved by exactly what went through.
  popped += t.cons.pop_batch(out.data(), kCap);
  REQUIRE(popped == pushed);
  REQUIRE(pushed > 100000 / kStressDivisor);
  REQUIRE(t.r->header.head.load() == static_cast<std::uint32_t>(start + pushed));
  REQUIRE(t.r->header.tail.load() == static_cast<std::uint32_t>(start + pushed));
  if (start >= 0xFFFFFF00u) REQUIRE(t.r->header.head.load() < start);  // really wrapped
}

TEST_CASE("ring full, empty and batch sizes", "[ring]") {
  TestRing t(GENERATE(0u, 0xFFFFFFF8u));
  TestEntry out[kCap * 2];

  REQUIRE(t.cons.ready() == 0);
  REQUIRE(t.cons.pop_batch(out, kCap) == 0);  // empty
  REQUIRE(t.prod.free_slots() == kCap);

  std::vector<TestEntry> in;
  for (std::uint32_t i = 0; i < 2 * kCap; ++i) in.push_back(make_entry(i));
  REQUIRE(t.prod.push_batch(in.data(), 0) == 0);
  REQUIRE(t.prod.push_batch(in.data(), 2 * kCap) == kCap);  // only what fits
  REQUIRE(t.prod.free_slots() == 0);
  REQUIRE_FALSE(t.prod.try_push(in[kCap]));  // full
  REQUIRE(t.cons.ready() == kCap);

  REQUIRE(t.cons.pop_batch(out, 3) == 3);
  REQUIRE(t.prod.push_batch(in.data() + kCap, 10) == 3);
  REQUIRE(t.cons.pop_batch(out + 3, 2 * kCap) == kCap);
  for (std::uint32_t i = 0; i < kCap + 3; ++i) REQUIRE(entry_ok(out[i], i));
  REQUIRE(t.cons.pop_batch(out, 1) == 0);
  REQUIRE(t.prod.free_slots() == kCap);
  REQUIRE(t.cons.pop_batch(out, 0) == 0);
}

TEST_CASE("hostile producer head is reported, nothing consumed", "[ring]") {
  const std::uint32_t start = GENERATE(0u, 0xFFFFFFF0u);
  TestRing t(start);
  TestEntry e = make_entry(0), out;
  REQUIRE(t.prod.try_push(e));

  SECTION("exactly one ring ahead is legal") {
    t.r->header.head.store(start + kCap);
    REQUIRE(t.cons.ready() == kCap);
    REQUIRE_FALSE(t.cons.corrupt());
  }
  SECTION("more than one ring ahead") {
    t.r->header.head.store(start + kCap + 1);
    REQUIRE(t.cons.pop_batch(&out, 1) == 0);
    REQUIRE(t.cons.corrupt());
    REQUIRE(t.r->header.tail.load() == start);
  }
  SECTION("head moved backwards behind tail") {
    REQUIRE(t.cons.pop_batch(&out, 1) == 1);
    t.r->header.head.store(start);  // tail is start + 1
    REQUIRE(t.cons.pop_batch(&out, 1) == 0);
    REQUIRE(t.cons.corrupt());
    REQUIRE(t.r->header.tail.load() == start + 1);
    REQUIRE_FALSE(t.cons.prepare_to_sleep());  // a corrupt ring does not sleep either
  }
}

TEST_CASE("hostile consumer tail makes the ring look full", "[ring]") {
  TestRing t(GENERATE(0u, 0xFFFFFFF0u));
  TestEntry e = make_entry(0);
  REQUIRE(t.prod.try_push(e));
  const std::uint32_t head = t.r->header.head.load();
  for (std::uint32_t bad : {head + 1, head + 1000, head - kCap - 1, head - 0x80000000u}) {
    CAPTURE(bad);
    t.r->header.tail.store(bad);
    REQUIRE(t.prod.free_slots() == 0);
    REQUIRE_FALSE(t.prod.try_push(e));
    REQUIRE(t.r->header.head.load() == head);  // nothing published
  }
  t.r->header.tail.store(head - kCap);  // exactly full is honest
  REQUIRE(t.prod.free_slots() == 0);
  t.r->header.tail.store(head);
  REQUIRE(t.prod.free_slots() == kCap);
}

TEST_CASE("doorbell sleep protocol, step by step", "[ring][doorbell]") {
  TestRing t;
  Doorbell bell = std::move(Doorbell::create().value);
  TestEntry e = make_entry(0), out;

  // Awake consumer: the producer never rings.
  REQUIRE(t.prod.try_push(e));
  REQUIRE_FALSE(t.prod.claim_doorbell());

  // Entries pending: the consumer must not sleep and leaves the flag clear.
  REQUIRE_FALSE(t.cons.prepare_to_sleep());
  REQUIRE(t.r->header.consumer_waiting.load() == 0);
  REQUIRE_FALSE(t.prod.claim_doorbell());

  REQUIRE(t.cons.pop_batch(&out, 1) == 1);
  REQUIRE(t.cons.prepare_to_sleep());
  REQUIRE(t.r->header.consumer_waiting.load() == 1);

  // Producer publishes, sees the flag, rings: the sleeper wakes and finds work.
  REQUIRE(t.prod.try_push(make_entry(1)));
  REQUIRE(t.prod.claim_doorbell());
  REQUIRE(t.r->header.consumer_waiting.load() == 0);  // claimed: one ring per sleep
  bell.ring();
  // More entries before the sleeper runs ring nothing more.
  REQUIRE(t.prod.try_push(make_entry(2)));
  REQUIRE_FALSE(t.prod.claim_doorbell());
  REQUIRE(bell.wait(1000));
  t.cons.woke_up();
  REQUIRE_FALSE(t.prod.claim_doorbell());
  REQUIRE(t.cons.pop_batch(&out, 1) == 1);
  REQUIRE(entry_ok(out, 1));
  REQUIRE(t.cons.pop_batch(&out, 1) == 1);
  REQUIRE(entry_ok(out, 2));

  // What the stress tests treat as a lost wake-up: a producer that publishes
  // without ringing leaves the sleeper timing out with work pending.
  REQUIRE(t.cons.prepare_to_sleep());
  REQUIRE(t.prod.try_push(make_entry(2)));
  REQUIRE_FALSE(bell.wait(20));
  REQUIRE(t.cons.ready() == 1);
  t.cons.woke_up();
}

TEST_CASE("records: an entry and its bytes go together, across the ring's end and the index wrap", "[ring]") {
  const std::uint32_t start = GENERATE(0u, kCap - 2, 0xFFFFFFFEu);
  CAPTURE(start);
  TestRing t(start);
  constexpr std::uint32_t kSlot = sizeof(TestEntry);
  std::vector<std::byte> data(3 * kSlot - 7);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 7 + 1);
  const auto bytes = static_cast<std::uint32_t>(data.size());
  REQUIRE(t.prod.try_push_record(make_entry(5), data.data(), bytes));
  REQUIRE(t.cons.ready() == 4);  // the entry and three slots of bytes, published at once
  TestEntry e;
  REQUIRE(t.cons.pop_batch(&e, 1) == 1);
  CHECK(entry_ok(e, 5));
  std::vector<std::byte> back(bytes);
  REQUIRE(t.cons.pop_bytes(back.data(), bytes));
  CHECK(back == data);
  CHECK(t.cons.ready() == 0);
  // Not published: nothing consumed.
  CHECK_FALSE(t.cons.pop_bytes(back.data(), 1));
  // No room for all of it: nothing written.
  std::vector<TestEntry> fill(kCap - 3, make_entry(9));
  REQUIRE(t.prod.push_batch(fill.data(), kCap - 3) == kCap - 3);
  CHECK_FALSE(t.prod.try_push_record(make_entry(6), data.data(), bytes));
  CHECK(t.cons.ready() == kCap - 3);
  CHECK(t.prod.try_push_record(make_entry(6), data.data(), 2 * kSlot));  // exactly fits
  CHECK(t.prod.free_slots() == 0);
}

TEST_CASE("released: the consumer's count reaches the producer", "[ring]") {
  TestRing t;
  CHECK(t.prod.consumer_released() == 0);
  t.cons.publish_released(41);
  CHECK(t.prod.consumer_released() == 41);
}
