// SlabAllocator against a reference model: every decision the allocator makes
// (success or failure of each alloc, each free's status, the stats) is
// predicted by a model that tracks live blocks and per-slab occupancy.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "shm/slab_allocator.h"

using ferry::Status;
using namespace ferry::shm;

namespace {

bool same_stats(const AllocatorStats& a, const AllocatorStats& b) {
  return a.arena_bytes == b.arena_bytes && a.quota_bytes == b.quota_bytes && a.allocated_bytes == b.allocated_bytes &&
         a.live_blocks == b.live_blocks && a.free_slabs == b.free_slabs && a.failed_allocs == b.failed_allocs;
}

std::uint32_t class_index(std::uint32_t capacity) {
  std::uint32_t c = 0;
  while ((kMinBlockBytes << c) < capacity) ++c;
  return c;
}

// Reference model of the allocator's observable state.
struct Model {
  struct SlabUse {
    std::uint32_t size_class = 0;
    std::uint32_t live = 0;
  };

  std::uint64_t base, slabs, quota;
  std::map<std::uint64_t, std::uint32_t> live;  // offset -> capacity
  std::vector<std::uint64_t> live_list;         // for random picks
  std::map<std::uint64_t, SlabUse> used_slabs;  // slab index -> use
  std::uint64_t allocated = 0;
  std::uint64_t failed = 0;

  // Whether alloc of `cap` must succeed: quota room, and either an unused
  // slab or a non-full slab of that class.
  bool expect_fit(std::uint32_t cap) const {
    if (allocated + cap > quota) return false;
    if (used_slabs.size() < slabs) return true;
    const std::uint32_t cls = class_index(cap);
    for (const auto& [idx, use] : used_slabs) {
      if (use.size_class == cls && use.live < kSlabBytes / cap) return true;
    }
    return false;
  }

  void add(const Block& b) {
    live.emplace(b.offset, b.capacity);
    live_list.push_back(b.offset);
    allocated += b.capacity;
    SlabUse& u = used_slabs[(b.offset - base) / kSlabBytes];
    u.size_class = class_index(b.capacity);
    ++u.live;
  }

  void remove(std::size_t list_index) {
    const std::uint64_t off = live_list[list_index];
    live_list[list_index] = live_list.back();
    live_list.pop_back();
    allocated -= live.at(off);
    live.erase(off);
    auto it = used_slabs.find((off - base) / kSlabBytes);
    if (--it->second.live == 0) used_slabs.erase(it);
  }

  void check(const SlabAllocator& a) const {
    const AllocatorStats s = a.stats();
    REQUIRE(s.allocated_bytes == allocated);
    REQUIRE(s.allocated_bytes <= s.quota_bytes);
    REQUIRE(s.live_blocks == live.size());
    REQUIRE(s.free_slabs == slabs - used_slabs.size());
    REQUIRE(s.failed_allocs == failed);
  }
};

// Lengths skewed small: pick a bit width, then a length under it.
std::uint32_t random_length(std::mt19937_64& rng) {
  static constexpr std::uint32_t kWeights[] = {8, 8, 8, 8, 8, 8, 8, 7, 6, 5, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1};
  std::discrete_distribution<int> bits(std::begin(kWeights), std::end(kWeights));
  const int b = bits(rng);  // 0..20
  const std::uint32_t top = 1u << b;
  return 1 + static_cast<std::uint32_t>(rng() % top);  // 1 .. 2^b, at most kSlabBytes
}

// Returns how many allocs failed, so callers can check the exhausted paths ran.
std::uint64_t run_model(std::uint64_t seed, std::uint64_t base, std::uint64_t arena, std::uint64_t quota_arg, int ops) {
  CAPTURE(seed, base, arena, quota_arg);
  std::mt19937_64 rng(seed);
  SlabAllocator a(base, arena, quota_arg);
  const std::uint64_t slabs = arena / kSlabBytes;
  Model m{base, slabs, quota_arg == 0 ? slabs * kSlabBytes : quota_arg, {}, {}, {}, 0, 0};
  REQUIRE(a.bytes() == slabs * kSlabBytes);
  REQUIRE(a.stats().free_slabs == slabs);

  for (int op = 0; op < ops; ++op) {
    const std::uint32_t dice = static_cast<std::uint32_t>(rng() % 100);
    if (dice < 52 || m.live_list.empty()) {
      const std::uint32_t len = random_length(rng);
      const std::uint32_t cap = SlabAllocator::class_capacity(len);
      REQUIRE(cap >= len);
      REQUIRE((cap & (cap - 1)) == 0);
      REQUIRE(cap >= kMinBlockBytes);
      const bool fit = m.expect_fit(cap);
      const std::optional<Block> b = a.alloc(len);
      REQUIRE(b.has_value() == fit);
      if (!b) {
        ++m.failed;
      } else {
        REQUIRE(b->capacity == cap);
        REQUIRE(b->offset >= base);
        REQUIRE(b->offset + b->capacity <= base + a.bytes());
        REQUIRE((b->offset - base) % cap == 0);  // naturally aligned inside its slab
        auto next = m.live.lower_bound(b->offset);
        if (next != m.live.end()) REQUIRE(next->first >= b->offset + b->capacity);
        if (next != m.live.begin()) {
          auto prev = std::prev(next);
          REQUIRE(prev->first + prev->second <= b->offset);
        }
        m.add(*b);
        REQUIRE(a.live_capacity(b->offset) == cap);
      }
    } else if (dice < 94) {
      const std::size_t i = rng() % m.live_list.size();
      const std::uint64_t off = m.live_list[i];
      REQUIRE(a.live_capacity(off) == m.live.at(off));
      REQUIRE(a.free(off) == Status::Ok);
      m.remove(i);
      REQUIRE(a.live_capacity(off) == 0);
      if (dice < 60) {  // immediate double free
        const AllocatorStats before = a.stats();
        REQUIRE(a.free(off) == Status::BadRequest);
        REQUIRE(same_stats(before, a.stats()));
      }
    } else {
      // Hostile frees: mid-block, or any offset around the arena.
      const AllocatorStats before = a.stats();
      std::uint64_t off;
      if (dice < 97 && !m.live_list.empty()) {
        const std::uint64_t start = m.live_list[rng() % m.live_list.size()];
        off = start + 1 + rng() % (m.live.at(start) - 1);
      } else {
        off = base - std::min<std::uint64_t>(base, kSlabBytes) + rng() % (a.bytes() + 2 * kSlabBytes);
        if (rng() % 2) off &= ~std::uint64_t{63};  // often block-aligned, to hit freed/unused blocks
      }
      auto it = m.live.find(off);
      if (it != m.live.end()) {
        REQUIRE(a.free(off) == Status::Ok);
        for (std::size_t i = 0; i < m.live_list.size(); ++i) {
          if (m.live_list[i] == off) {
            m.remove(i);
            break;
          }
        }
      } else {
        REQUIRE(a.live_capacity(off) == 0);
        REQUIRE(a.free(off) == Status::BadRequest);
        REQUIRE(same_stats(before, a.stats()));
      }
    }
    if (op % 64 == 0) m.check(a);
  }
  m.check(a);

  // Free everything in random order: no leak, every slab back in the pool.
  while (!m.live_list.empty()) {
    const std::size_t i = rng() % m.live_list.size();
    REQUIRE(a.free(m.live_list[i]) == Status::Ok);
    m.remove(i);
  }
  m.check(a);
  const AllocatorStats s = a.stats();
  REQUIRE(s.live_blocks == 0);
  REQUIRE(s.allocated_bytes == 0);
  REQUIRE(s.free_slabs == slabs);

  // Every slab is reusable at the largest size, up to the quota.
  const std::uint64_t max_blocks = std::min(slabs, m.quota / kSlabBytes);
  for (std::uint64_t i = 0; i < max_blocks; ++i) REQUIRE(a.alloc(kSlabBytes).has_value());
  REQUIRE_FALSE(a.alloc(kSlabBytes).has_value());
  return m.failed;
}

}  // namespace

TEST_CASE("allocator matches the reference model", "[allocator]") {
  // Seeds x (base, arena, quota): a roomy arena, a tight one that often runs
  // out of slabs, and a quota below the arena.
  for (std::uint64_t seed : {1ull, 2ull, 3ull, 0xfe11eull}) {
    run_model(seed, 0x40000, 64ull << 20, 0, 60000);
    REQUIRE(run_model(seed * 7 + 1, 0x10000, (6ull << 20) + 12345, 0, 60000) > 100);            // out of slabs
    REQUIRE(run_model(seed * 13 + 5, 0x200000, 32ull << 20, (5ull << 20) + 100, 60000) > 100);  // over quota
  }
}

TEST_CASE("allocator edge cases", "[allocator]") {
  SlabAllocator a(4096, (4ull << 20) + 100);  // rounded down to 4 slabs
  REQUIRE(a.bytes() == 4 * kSlabBytes);
  REQUIRE(a.stats().quota_bytes == 4 * kSlabBytes);

  SECTION("length 0 and above a slab are rejected") {
    REQUIRE_FALSE(a.alloc(0).has_value());
    REQUIRE_FALSE(a.alloc(kSlabBytes + 1).has_value());
    REQUIRE_FALSE(a.alloc(UINT32_MAX).has_value());
    REQUIRE(SlabAllocator::class_capacity(0) == 0);
    REQUIRE(SlabAllocator::class_capacity(kSlabBytes + 1) == 0);
    REQUIRE(a.stats().failed_allocs == 3);
    REQUIRE(a.stats().live_blocks == 0);
  }
  SECTION("class capacities") {
    REQUIRE(SlabAllocator::class_capacity(1) == 64);
    REQUIRE(SlabAllocator::class_capacity(64) == 64);
    REQUIRE(SlabAllocator::class_capacity(65) == 128);
    REQUIRE(SlabAllocator::class_capacity(4097) == 8192);
    REQUIRE(SlabAllocator::class_capacity(kSlabBytes) == kSlabBytes);
  }
  SECTION("frees outside the arena or of never-used blocks") {
    auto b = a.alloc(100);
    REQUIRE(b.has_value());
    REQUIRE(b->offset == 4096);
    const AllocatorStats before = a.stats();
    for (std::uint64_t off : {std::uint64_t{0}, std::uint64_t{4095}, b->offset + 128, b->offset + 64,
                              std::uint64_t{4096} + kSlabBytes, std::uint64_t{4096} + 4 * kSlabBytes, UINT64_MAX}) {
      CAPTURE(off);
      REQUIRE(a.free(off) == Status::BadRequest);
      REQUIRE(same_stats(before, a.stats()));
    }
    REQUIRE(a.free(b->offset) == Status::Ok);
    REQUIRE(a.free(b->offset) == Status::BadRequest);
  }
  SECTION("a fully free slab returns to the pool and takes another class") {
    std::vector<Block> small;
    for (std::uint32_t i = 0; i < kSlabBytes / 64; ++i) small.push_back(*a.alloc(64));
    REQUIRE(a.stats().free_slabs == 3);  // exactly one slab holds all of them
    auto next = a.alloc(64);
    REQUIRE(a.stats().free_slabs == 2);
    REQUIRE(a.free(next->offset) == Status::Ok);
    REQUIRE(a.stats().free_slabs == 3);
    for (const Block& b : small) REQUIRE(a.free(b.offset) == Status::Ok);
    REQUIRE(a.stats().free_slabs == 4);
    for (int i = 0; i < 4; ++i) REQUIRE(a.alloc(kSlabBytes).has_value());
    REQUIRE_FALSE(a.alloc(1).has_value());
  }
}

TEST_CASE("allocator quota counts capacities, not lengths", "[allocator]") {
  SlabAllocator a(0, 8 * kSlabBytes, kSlabBytes + 64);
  auto big = a.alloc(kSlabBytes - 1);  // capacity 1 MiB
  REQUIRE(big.has_value());
  REQUIRE_FALSE(a.alloc(65).has_value());  // 128 > remaining 64
  auto small = a.alloc(64);
  REQUIRE(small.has_value());
  REQUIRE_FALSE(a.alloc(1).has_value());
  REQUIRE(a.stats().allocated_bytes == kSlabBytes + 64);
  REQUIRE(a.free(big->offset) == Status::Ok);
  REQUIRE(a.alloc(kSlabBytes).has_value());
}

TEST_CASE("allocator over a 4 GiB arena", "[allocator]") {
  SlabAllocator a(1ull << 16, 4ull << 30);
  REQUIRE(a.stats().free_slabs == 4096);
  std::vector<Block> blocks;
  for (int i = 0; i < 4096; ++i) blocks.push_back(*a.alloc(kSlabBytes / 2 + 1));
  REQUIRE_FALSE(a.alloc(1).has_value());
  REQUIRE(blocks.back().offset + kSlabBytes == (1ull << 16) + (4ull << 30));
  for (const Block& b : blocks) REQUIRE(a.free(b.offset) == Status::Ok);
  REQUIRE(a.stats().free_slabs == 4096);
}

TEST_CASE("allocator keeps one wholly free slab per class formatted, free to any class", "[allocator]") {
  SlabAllocator a(0, 2 * kSlabBytes);
  // One block allocated and freed over and over: the same block, and the
  // slab counted free each time it is empty.
  auto first = a.alloc(100);
  REQUIRE(first.has_value());
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(a.free(first->offset) == Status::Ok);
    REQUIRE(a.stats().free_slabs == 2);
    auto again = a.alloc(100);
    REQUIRE(again.has_value());
    REQUIRE(again->offset == first->offset);
  }
  REQUIRE(a.free(first->offset) == Status::Ok);
  REQUIRE(a.free(first->offset) == Status::BadRequest);  // still no double free
  // The kept slab is free to another class once the pool is empty.
  auto big1 = a.alloc(kSlabBytes);
  auto big2 = a.alloc(kSlabBytes);
  REQUIRE(big1.has_value());
  REQUIRE(big2.has_value());
  REQUIRE(a.stats().free_slabs == 0);
  REQUIRE_FALSE(a.alloc(64).has_value());
}

TEST_CASE("allocator spans: whole free slabs side by side, the lowest run that fits", "[allocator][span]") {
  SlabAllocator a(0x10000, 8 * kSlabBytes);
  REQUIRE_FALSE(a.alloc_span(kSlabBytes).has_value());      // a slab or less is alloc()'s
  REQUIRE_FALSE(a.alloc_span(9 * kSlabBytes).has_value());  // longer than the arena
  auto small = a.alloc(100);                                // slab 0, of class 128
  REQUIRE(small.has_value());
  auto span = a.alloc_span(2 * kSlabBytes + 1);  // 3 slabs: 1, 2, 3
  REQUIRE(span.has_value());
  REQUIRE(span->offset == 0x10000 + kSlabBytes);
  REQUIRE(span->capacity == 3 * kSlabBytes);
  REQUIRE(a.live_capacity(span->offset) == 3 * kSlabBytes);
  REQUIRE(a.live_capacity(span->offset + kSlabBytes) == 0);  // inside it: no block starts there
  REQUIRE(a.stats().allocated_bytes == 3 * kSlabBytes + 128);
  REQUIRE(a.stats().live_blocks == 2);
  REQUIRE(a.stats().free_slabs == 4);
  // A span's inside is no block to free; the whole arena outside it still serves alloc().
  REQUIRE(a.free(span->offset + kSlabBytes) == Status::BadRequest);
  REQUIRE(a.free(span->offset + 64) == Status::BadRequest);
  std::vector<Block> rest;
  for (int i = 0; i < 4; ++i) rest.push_back(*a.alloc(kSlabBytes));
  REQUIRE(rest[0].offset == 0x10000 + 4 * kSlabBytes);  // past the span
  REQUIRE_FALSE(a.alloc(kSlabBytes).has_value());
  REQUIRE(a.free(span->offset) == Status::Ok);
  REQUIRE(a.free(span->offset) == Status::BadRequest);  // once
  REQUIRE(a.stats().free_slabs == 3);
  // Its slabs serve any class again, low offsets first.
  auto again = a.alloc(kSlabBytes);
  REQUIRE(again.has_value());
  REQUIRE(again->offset == 0x10000 + kSlabBytes);
  REQUIRE(a.free(again->offset) == Status::Ok);
  // No run long enough: slabs 1-3 are free, 4-7 are not.
  REQUIRE_FALSE(a.alloc_span(4 * kSlabBytes).has_value());
  REQUIRE(a.alloc_span(3 * kSlabBytes).has_value());
}

TEST_CASE("allocator spans take a class's kept slab and respect the quota", "[allocator][span]") {
  SlabAllocator a(0, 4 * kSlabBytes, 3 * kSlabBytes);
  auto b = a.alloc(64);
  REQUIRE(b.has_value());
  REQUIRE(a.free(b->offset) == Status::Ok);  // slab 0 kept formatted for class 64
  REQUIRE(a.stats().free_slabs == 4);
  REQUIRE_FALSE(a.alloc_span(4 * kSlabBytes).has_value());  // over the quota of 3 slabs
  auto span = a.alloc_span(3 * kSlabBytes);
  REQUIRE(span.has_value());
  REQUIRE(span->offset == 0);  // the kept slab counted free
  REQUIRE(a.stats().free_slabs == 1);
  REQUIRE_FALSE(a.alloc(64).has_value());  // the quota is spent
  REQUIRE(a.free(span->offset) == Status::Ok);
  auto c = a.alloc(64);  // class 64 formats a slab from the pool again
  REQUIRE(c.has_value());
  REQUIRE(a.stats().allocated_bytes == 64);
}

TEST_CASE("allocator with spans and blocks mixed matches a slab-occupancy model", "[allocator][span]") {
  // Per slab: free, or used by blocks of one class, or part of a span. A span
  // must succeed exactly when a run of free slabs (kept ones counted free) is
  // long enough within the quota; every free of a non-start is refused.
  for (std::uint64_t seed : {11ull, 12ull, 13ull}) {
    std::mt19937_64 rng(seed);
    constexpr std::uint32_t kSlabs = 24;
    SlabAllocator a(0x40000, kSlabs * kSlabBytes);
    std::map<std::uint64_t, std::uint32_t> live;  // offset -> capacity
    std::vector<int> slab_blocks(kSlabs, 0);      // live blocks per slab; -1: in a span
    std::uint64_t allocated = 0;
    for (int op = 0; op < 20000; ++op) {
      const auto r = rng() % 10;
      if (r < 3) {
        const std::uint64_t len = kSlabBytes + 1 + rng() % (6 * kSlabBytes);
        const std::uint32_t need = static_cast<std::uint32_t>((len + kSlabBytes - 1) / kSlabBytes);
        // The lowest run of `need` slabs with no live block (a kept slab has none).
        std::int64_t first = -1;
        for (std::uint32_t s = 0, run = 0; s < kSlabs; ++s) {
          run = slab_blocks[s] == 0 ? run + 1 : 0;
          if (run == need) {
            first = s + 1 - need;
            break;
          }
        }
        auto got = a.alloc_span(len);
        REQUIRE(got.has_value() == (first >= 0));
        if (!got) continue;
        REQUIRE(got->offset == 0x40000 + static_cast<std::uint64_t>(first) * kSlabBytes);
        REQUIRE(got->capacity == need * kSlabBytes);
        for (std::uint32_t s = 0; s < need; ++s) slab_blocks[first + s] = -1;
        live.emplace(got->offset, got->capacity);
        allocated += got->capacity;
      } else if (r < 6) {
        const std::uint32_t len = 1 + static_cast<std::uint32_t>(rng() % kSlabBytes);
        auto got = a.alloc(len);
        if (!got) continue;  // whether it fits depends on partial slabs: the model above checks blocks
        const auto slab = static_cast<std::uint32_t>((got->offset - 0x40000) / kSlabBytes);
        REQUIRE(slab_blocks[slab] >= 0);  // never inside a span
        ++slab_blocks[slab];
        live.emplace(got->offset, got->capacity);
        allocated += got->capacity;
      } else if (!live.empty()) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng() % live.size()));
        const auto slab = static_cast<std::uint32_t>((it->first - 0x40000) / kSlabBytes);
        if (it->second > kSlabBytes) {
          REQUIRE(a.free(it->first + kSlabBytes) == Status::BadRequest);  // a span's inside
          for (std::uint32_t s = 0; s < it->second / kSlabBytes; ++s) slab_blocks[slab + s] = 0;
        } else {
          --slab_blocks[slab];
        }
        REQUIRE(a.free(it->first) == Status::Ok);
        allocated -= it->second;
        live.erase(it);
      }
      REQUIRE(a.stats().allocated_bytes == allocated);
      REQUIRE(a.stats().live_blocks == live.size());
    }
    for (const auto& [offset, cap] : live) REQUIRE(a.free(offset) == Status::Ok);
    REQUIRE(a.stats().free_slabs == kSlabs);
    REQUIRE(a.alloc_span(kSlabs * kSlabBytes).has_value());  // the whole arena, one run again
  }
}
