// Helpers shared by the ring tests: a 64-byte self-checking entry and a ring
// placed in MAP_SHARED memory so it can cross fork().
#pragma once

#include <sys/mman.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <new>

#include "shm/ring.h"

namespace ferry::shm::test {

// Deterministic per-sequence payload, so the consumer can verify content as
// well as the checksum.
constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct TestEntry {
  std::uint64_t seq;
  std::uint64_t payload[6];
  std::uint64_t checksum;  // FNV-1a over seq and payload
};
static_assert(sizeof(TestEntry) == 64);

constexpr std::uint64_t fnv1a(const TestEntry& e) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](std::uint64_t w) {
    for (int i = 0; i < 8; ++i) {
      h ^= (w >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  mix(e.seq);
  for (std::uint64_t w : e.payload) mix(w);
  return h;
}

constexpr TestEntry make_entry(std::uint64_t seq) noexcept {
  TestEntry e{};
  e.seq = seq;
  for (int i = 0; i < 6; ++i) e.payload[i] = splitmix64(seq * 8 + static_cast<std::uint64_t>(i));
  e.checksum = fnv1a(e);
  return e;
}

// True when e is exactly the entry the producer made for `seq`.
constexpr bool entry_ok(const TestEntry& e, std::uint64_t seq) noexcept {
  if (e.seq != seq || e.checksum != fnv1a(e)) return false;
  for (int i = 0; i < 6; ++i) {
    if (e.payload[i] != splitmix64(seq * 8 + static_cast<std::uint64_t>(i))) return false;
  }
  return true;
}

template <std::uint32_t Capacity>
struct SharedRing {
  RingHeader header;
  alignas(kCacheLine) TestEntry entries[Capacity];
};

// A SharedRing in anonymous MAP_SHARED memory (survives fork as shared).
template <std::uint32_t Capacity>
class SharedRingRegion {
 public:
  SharedRingRegion() {
    void* p = ::mmap(nullptr, sizeof(SharedRing<Capacity>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      ring_ = new (p) SharedRing<Capacity>;
      ring_init(&ring_->header);
    }
  }
  ~SharedRingRegion() {
    if (ring_ != nullptr) ::munmap(ring_, sizeof(SharedRing<Capacity>));
  }
  SharedRingRegion(const SharedRingRegion&) = delete;
  SharedRingRegion& operator=(const SharedRingRegion&) = delete;

  bool ok() const noexcept { return ring_ != nullptr; }
  SharedRing<Capacity>* get() const noexcept { return ring_; }

 private:
  SharedRing<Capacity>* ring_ = nullptr;
};

using Clock = std::chrono::steady_clock;

// Sanitizer builds (scripts/test runs the ring tests under TSan and ASan,
// unoptimised) are 10-50x slower; they shrink the stress counts so the runs
// stay within their meson timeouts. The interleavings still number millions.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr std::uint64_t kStressDivisor = 8;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr std::uint64_t kStressDivisor = 8;
#else
inline constexpr std::uint64_t kStressDivisor = 1;
#endif
#else
inline constexpr std::uint64_t kStressDivisor = 1;
#endif

}  // namespace ferry::shm::test
