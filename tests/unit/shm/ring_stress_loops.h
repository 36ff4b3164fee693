// Producer and consumer loops for the ring stress tests, shared by the
// two-process (fork) and two-thread variants. Both loops are bounded by a
// deadline, so a lost wake-up or a dead peer fails the test instead of hanging
// it.
#pragma once

#include <sched.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "ring_test_util.h"
#include "shm/doorbell.h"
#include "shm/ring.h"

namespace ferry::shm::test {

struct ConsumerReport {
  std::uint64_t received = 0;
  std::uint64_t bad_entries = 0;  // wrong sequence, payload or checksum
  std::uint64_t first_bad_seq = UINT64_MAX;
  std::uint64_t sleeps = 0;         // waits entered on the doorbell
  std::uint64_t lost_wakeups = 0;   // wait timed out although entries were pending
  std::uint64_t idle_timeouts = 0;  // wait timed out with nothing pending (slow producer)
  bool corrupt = false;
  bool deadline_passed = false;
};

struct ProducerReport {
  std::uint64_t sent = 0;
  std::uint64_t rings = 0;
  bool deadline_passed = false;
  bool peer_died = false;
};

// A lost wake-up shows up as a wait that times out with entries pending. The
// timeout is long against any plausible publish->ring gap of the producer.
inline constexpr int kWakeupWaitMs = 2000;

// Consumes `count` entries, checking each. With a doorbell, sleeps on it
// whenever the ring is empty (the protocol under test); without, spins and
// yields.
template <std::uint32_t Capacity>
ConsumerReport consume(SharedRing<Capacity>* r, std::uint64_t count, const Doorbell* bell, Clock::time_point deadline) {
  RingConsumer<TestEntry> cons(&r->header, r->entries, Capacity);
  ConsumerReport rep;
  TestEntry batch[32];
  std::uint32_t empty_polls = 0;
  while (rep.received < count) {
    const std::uint32_t n = cons.pop_batch(batch, 32);
    if (cons.corrupt()) {
      rep.corrupt = true;
      break;
    }
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!entry_ok(batch[i], rep.received) && rep.bad_entries++ == 0) rep.first_bad_seq = rep.received;
      ++rep.received;
    }
    if (n != 0) {
      empty_polls = 0;
      continue;
    }
    if (Clock::now() > deadline) {
      rep.deadline_passed = true;
      break;
    }
    if (bell == nullptr) {
      if (++empty_polls > 64) sched_yield();
      continue;
    }
    if (!cons.prepare_to_sleep()) continue;  // work arrived meanwhile
    ++rep.sleeps;
    const bool rung = bell->wait(kWakeupWaitMs);
    cons.woke_up();
    if (!rung) {
      if (cons.ready() != 0) {
        ++rep.lost_wakeups;
        break;
      }
      ++rep.idle_timeouts;
    }
  }
  return rep;
}

// Waits until the consumer announced that it sleeps, at most 100 ms.
inline void wait_for_sleeper(const RingHeader& header) {
  const auto give_up = Clock::now() + std::chrono::milliseconds(100);
  while (header.consumer_waiting.load(std::memory_order_acquire) == 0 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// Produces `count` entries in batches of varying size. With a doorbell, rings
// it only when the consumer announced it sleeps, and pauses now and then so
// the consumer does run dry and sleep. `peer_alive` is polled while the ring
// is full.
template <std::uint32_t Capacity, typename PeerAlive>
ProducerReport produce(SharedRing<Capacity>* r, std::uint64_t count, const Doorbell* bell, Clock::time_point deadline,
                       PeerAlive peer_alive) {
  RingProducer<TestEntry> prod(&r->header, r->entries, Capacity);
  ProducerReport rep;
  TestEntry batch[32];
  std::uint32_t full_polls = 0;
  while (rep.sent < count) {
    const std::uint64_t want = std::min<std::uint64_t>(1 + (splitmix64(rep.sent) % 32), count - rep.sent);
    for (std::uint64_t i = 0; i < want; ++i) batch[i] = make_entry(rep.sent + i);
    std::uint32_t done = 0;
    while (done < want) {
      const std::uint32_t n = prod.push_batch(batch + done, static_cast<std::uint32_t>(want) - done);
      done += n;
      if (n != 0) {
        full_polls = 0;
        if (bell != nullptr && prod.claim_doorbell()) {
          bell->ring();
          ++rep.rings;
        }
        continue;
      }
      if (++full_polls % 1024 == 0) {
        if (Clock::now() > deadline) rep.deadline_passed = true;
        if (!peer_alive()) rep.peer_died = true;
        if (rep.deadline_passed || rep.peer_died) return rep;
      }
      if (full_polls > 64) sched_yield();
    }
    const std::uint64_t before = rep.sent;
    rep.sent += want;
    // Pacing, not synchronisation: every 4096 entries the producer stops
    // until the consumer has drained the ring and announced its sleep (or
    // 100 ms pass), so the sleep path runs once per pause however slowly the
    // consumer runs (a fixed pause was shorter than a TSan consumer's drain).
    if (bell != nullptr && before / 4096 != rep.sent / 4096) wait_for_sleeper(r->header);
  }
  return rep;
}

}  // namespace ferry::shm::test
