// The RDMA-aware arena allocator. An arena (a range of a client segment that
// the daemon registers once) is carved into fixed-size slabs; each slab, on
// first use, is dedicated to one power-of-two size class and cut into equal
// blocks. alloc and free are O(1), touch only private metadata (never the
// arena bytes, which an untrusted peer may scribble on) and make no system
// calls. free() validates: an offset that is not the start of a block
// currently allocated (out of range, mid-block, or already freed) returns
// BadRequest and changes nothing. A slab whose blocks are all free goes back
// to the shared pool, so a burst of one size does not strand memory; each
// class keeps its last such slab formatted (counted free, and taken by any
// class when the pool is empty), so one block allocated and freed over and
// over does not move a slab to the pool and back every time.
//
// alloc_span() hands out a block larger than a slab: a run of whole free
// slabs side by side (the lowest run that fits), freed with free() like any
// block. It serves memory that several messages fill side by side (the rows
// of a large pull), never one message, which stays within a slab.
//
// Used by libferry for the tx arena and by ferryd for each client's rx arena.
// Not thread safe: one owner.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ferry/status.h"

namespace ferry::shm {

inline constexpr std::uint32_t kMinBlockBytes = 64;
inline constexpr std::uint32_t kSlabBytes = 1u << 20;  // also the largest block
inline constexpr std::uint32_t kSizeClassCount = 15;   // 64 B .. 1 MiB
static_assert(kMinBlockBytes << (kSizeClassCount - 1) == kSlabBytes);
// The largest span (a block's capacity is 32 bits).
inline constexpr std::uint64_t kMaxSpanBytes = std::uint64_t{4095} * kSlabBytes;

struct Block {
  std::uint64_t offset;    // segment offset of the first byte
  std::uint32_t capacity;  // block size (>= requested length)
};

struct AllocatorStats {
  std::uint64_t arena_bytes;
  std::uint64_t quota_bytes;
  std::uint64_t allocated_bytes;  // sum of capacities of live blocks
  std::uint64_t live_blocks;
  std::uint64_t free_slabs;
  std::uint64_t failed_allocs;
};

class SlabAllocator {
 public:
  // Manages [base, base + bytes) of a segment; bytes is rounded down to whole
  // slabs. quota_bytes caps allocated_bytes (0 = the whole arena).
  SlabAllocator(std::uint64_t base, std::uint64_t bytes, std::uint64_t quota_bytes = 0);

  // Smallest class that holds `length` (1..kSlabBytes). nullopt when the
  // length is 0 or too large, the quota would be exceeded, or no slab is free.
  std::optional<Block> alloc(std::uint32_t length) noexcept;

  // A block of ceil(length / kSlabBytes) whole slabs side by side, for
  // lengths past one slab (up to kMaxSpanBytes); nullopt when no run of free
  // slabs is long enough or the quota would be exceeded. A class's kept slab
  // counts as free here.
  std::optional<Block> alloc_span(std::uint64_t length) noexcept;

  // Ok, or BadRequest for anything but the start of a live block.
  Status free(std::uint64_t offset) noexcept;

  // Capacity of the live block starting at offset, or 0.
  std::uint32_t live_capacity(std::uint64_t offset) const noexcept;

  // Capacity alloc(length) would hand out, or 0 when length is out of range.
  static std::uint32_t class_capacity(std::uint32_t length) noexcept;

  std::uint64_t base() const noexcept { return base_; }
  std::uint64_t bytes() const noexcept { return std::uint64_t{slab_count_} * kSlabBytes; }
  AllocatorStats stats() const noexcept;

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  struct Slab {
    std::uint8_t size_class = 0xff;            // 0xff: in the free pool; 0xfe: a span's first, 0xfd: its others
    std::uint32_t span = 0;                    // a span's first slab: the span's slabs
    std::uint32_t live = 0;                    // allocated blocks
    std::uint32_t free_top = 0;                // entries on the free-index stack
    std::uint32_t prev = kNone, next = kNone;  // in its class's partial list or the free pool
    std::vector<std::uint32_t> free_index;     // stack of free block indices
    std::vector<std::uint64_t> live_bits;      // one bit per block
  };

  void list_remove(std::uint32_t& head, std::uint32_t slab) noexcept;
  void list_push(std::uint32_t& head, std::uint32_t slab) noexcept;
  void format_slab(std::uint32_t slab, std::uint32_t size_class);

  std::uint64_t base_;
  std::uint32_t slab_count_;
  std::uint64_t quota_;
  std::uint64_t allocated_ = 0;
  std::uint64_t live_blocks_ = 0;
  std::uint64_t free_slab_count_ = 0;
  std::uint64_t failed_ = 0;
  std::vector<Slab> slabs_;
  std::uint32_t free_pool_ = kNone;
  std::uint32_t partial_[kSizeClassCount];  // slabs of that class with a free block
  std::uint32_t kept_[kSizeClassCount];     // the class's wholly free slab kept formatted (kNone: none)
  // The pool is empty: a class's kept slab, out of its class (kNone: none).
  std::uint32_t take_kept() noexcept;
  // Whether a slab is free for a span (in the pool, or a class's kept slab).
  bool span_free(std::uint32_t slab) const noexcept;
  // Takes a free slab out of the pool or its class (a kept slab) for a span.
  void take_for_span(std::uint32_t slab) noexcept;
  Status free_span(std::uint32_t slab, std::uint64_t within) noexcept;
};

}  // namespace ferry::shm
