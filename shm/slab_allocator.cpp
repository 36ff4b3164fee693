// SlabAllocator: see slab_allocator.h for the contract.
//
// Per slab, blocks are in one of three states: live, on the free-index stack
// (used before, now free), or never used. Never-used blocks are the indices
// [live + free_top, blocks_per_slab): every block ever handed out is either
// live or on the stack, so the bump index needs no field of its own, and
// formatting a slab for a class is O(1) (no list of its blocks is built).
#include "shm/slab_allocator.h"

#include <algorithm>
#include <bit>

namespace ferry::shm {

namespace {

constexpr std::uint8_t kPoolClass = 0xff;
constexpr std::uint8_t kSpanHead = 0xfe;  // a span's first slab
constexpr std::uint8_t kSpanTail = 0xfd;  // its other slabs

constexpr std::uint32_t kMinBlockShift = std::countr_zero(kMinBlockBytes);
constexpr std::uint32_t kSlabShift = std::countr_zero(kSlabBytes);
constexpr std::uint32_t block_bytes(std::uint32_t size_class) noexcept { return kMinBlockBytes << size_class; }
constexpr std::uint32_t blocks_per_slab(std::uint32_t size_class) noexcept {
  return kSlabBytes >> (kMinBlockShift + size_class);  // both powers of two
}

// Smallest class whose blocks hold `length`; length must be 1..kSlabBytes.
constexpr std::uint32_t class_of(std::uint32_t length) noexcept {
  std::uint32_t cap = std::max(kMinBlockBytes, std::bit_ceil(length));
  return static_cast<std::uint32_t>(std::countr_zero(cap) - std::countr_zero(kMinBlockBytes));
}
static_assert(class_of(1) == 0 && class_of(64) == 0 && class_of(65) == 1);
static_assert(class_of(kSlabBytes) == kSizeClassCount - 1);

}  // namespace

SlabAllocator::SlabAllocator(std::uint64_t base, std::uint64_t bytes, std::uint64_t quota_bytes)
    : base_(base),
      slab_count_(static_cast<std::uint32_t>(std::min<std::uint64_t>(bytes / kSlabBytes, kNone - 1))),
      quota_(quota_bytes == 0 ? std::uint64_t{slab_count_} * kSlabBytes : quota_bytes),
      free_slab_count_(slab_count_),
      slabs_(slab_count_) {
  std::fill(std::begin(partial_), std::end(partial_), kNone);
  std::fill(std::begin(kept_), std::end(kept_), kNone);
  // Pushed in reverse so the pool hands out low offsets first.
  for (std::uint32_t s = slab_count_; s-- > 0;) list_push(free_pool_, s);
}

void SlabAllocator::list_remove(std::uint32_t& head, std::uint32_t slab) noexcept {
  Slab& s = slabs_[slab];
  if (s.prev != kNone) {
    slabs_[s.prev].next = s.next;
  } else {
    head = s.next;
  }
  if (s.next != kNone) slabs_[s.next].prev = s.prev;
  s.prev = s.next = kNone;
}

void SlabAllocator::list_push(std::uint32_t& head, std::uint32_t slab) noexcept {
  Slab& s = slabs_[slab];
  s.prev = kNone;
  s.next = head;
  if (head != kNone) slabs_[head].prev = slab;
  head = slab;
}

// Dedicates a pooled slab to a class. The metadata vectors grow the first
// time the slab serves a class with more blocks than it has seen before and
// are then kept for the allocator's lifetime, so steady-state alloc/free never
// allocates. A pooled slab has no live blocks, hence all its live bits are
// already zero and the free stack can simply be emptied.
void SlabAllocator::format_slab(std::uint32_t slab, std::uint32_t size_class) {
  Slab& s = slabs_[slab];
  const std::uint32_t n = blocks_per_slab(size_class);
  if (s.free_index.size() < n) s.free_index.resize(n);
  const std::size_t words = (n + 63) / 64;
  if (s.live_bits.size() < words) s.live_bits.resize(words, 0);
  s.size_class = static_cast<std::uint8_t>(size_class);
  s.live = 0;
  s.free_top = 0;
}

std::optional<Block> SlabAllocator::alloc(std::uint32_t length) noexcept {
  if (length == 0 || length > kSlabBytes) {
    ++failed_;
    return std::nullopt;
  }
  const std::uint32_t cls = class_of(length);
  const std::uint32_t cap = block_bytes(cls);
  if (allocated_ + cap > quota_) {
    ++failed_;
    return std::nullopt;
  }
  std::uint32_t slab = partial_[cls];
  if (slab == kNone) {
    slab = free_pool_;
    if (slab != kNone) {
      list_remove(free_pool_, slab);
    } else if ((slab = take_kept()) == kNone) {
      ++failed_;
      return std::nullopt;
    }
    --free_slab_count_;
    format_slab(slab, cls);
    list_push(partial_[cls], slab);
  } else if (kept_[cls] == slab) {
    kept_[cls] = kNone;  // in use again
    --free_slab_count_;
  }
  Slab& s = slabs_[slab];
  const std::uint32_t n = blocks_per_slab(cls);
  // Reuse a freed block first (warm in cache), else bump into fresh ones.
  const std::uint32_t index = s.free_top != 0 ? s.free_index[--s.free_top] : s.live;
  ++s.live;
  s.live_bits[index / 64] |= std::uint64_t{1} << (index % 64);
  if (s.live == n) list_remove(partial_[cls], slab);
  allocated_ += cap;
  ++live_blocks_;
  return Block{base_ + (std::uint64_t{slab} << kSlabShift) + (std::uint64_t{index} << (kMinBlockShift + cls)), cap};
}

bool SlabAllocator::span_free(std::uint32_t slab) const noexcept {
  const std::uint8_t cls = slabs_[slab].size_class;
  return cls == kPoolClass || (cls < kSizeClassCount && kept_[cls] == slab);
}

void SlabAllocator::take_for_span(std::uint32_t slab) noexcept {
  Slab& s = slabs_[slab];
  if (s.size_class == kPoolClass) {
    list_remove(free_pool_, slab);
  } else {  // a class's kept slab: wholly free, on its class's partial list
    kept_[s.size_class] = kNone;
    list_remove(partial_[s.size_class], slab);
    s.free_top = 0;
  }
  --free_slab_count_;
}

std::optional<Block> SlabAllocator::alloc_span(std::uint64_t length) noexcept {
  const std::uint64_t need = (length + kSlabBytes - 1) >> kSlabShift;
  if (length <= kSlabBytes || length > kMaxSpanBytes || allocated_ + (need << kSlabShift) > quota_ ||
      need > free_slab_count_) {
    ++failed_;
    return std::nullopt;
  }
  // The lowest run of `need` free slabs.
  std::uint32_t first = 0;
  std::uint32_t run = 0;
  for (std::uint32_t slab = 0; slab < slab_count_ && run < need; ++slab) {
    if (!span_free(slab)) {
      run = 0;
      continue;
    }
    if (run++ == 0) first = slab;
  }
  if (run < need) {
    ++failed_;
    return std::nullopt;
  }
  for (std::uint32_t slab = first; slab < first + need; ++slab) {
    take_for_span(slab);
    slabs_[slab].size_class = slab == first ? kSpanHead : kSpanTail;
    slabs_[slab].live = 0;
  }
  slabs_[first].span = static_cast<std::uint32_t>(need);
  allocated_ += need << kSlabShift;
  ++live_blocks_;
  return Block{base_ + (std::uint64_t{first} << kSlabShift), static_cast<std::uint32_t>(need << kSlabShift)};
}

Status SlabAllocator::free_span(std::uint32_t slab, std::uint64_t within) noexcept {
  if (slabs_[slab].size_class != kSpanHead || within != 0) return Status::BadRequest;  // not a span's start
  const std::uint32_t n = slabs_[slab].span;
  // Back to the pool, last first, so that the pool hands out low offsets first again.
  for (std::uint32_t i = n; i-- > 0;) {
    Slab& s = slabs_[slab + i];
    s.size_class = kPoolClass;
    s.span = 0;
    s.free_top = 0;
    list_push(free_pool_, slab + i);
  }
  free_slab_count_ += n;
  allocated_ -= std::uint64_t{n} << kSlabShift;
  --live_blocks_;
  return Status::Ok;
}

Status SlabAllocator::free(std::uint64_t offset) noexcept {
  // The checks of live_capacity(), done once here: a live block's start.
  if (offset < base_) return Status::BadRequest;
  const std::uint64_t rel = offset - base_;
  const auto slab = static_cast<std::uint32_t>(rel >> kSlabShift);
  if (slab >= slab_count_) return Status::BadRequest;
  Slab& s = slabs_[slab];
  const std::uint32_t cls = s.size_class;
  if (cls == kPoolClass) return Status::BadRequest;
  if (cls == kSpanHead || cls == kSpanTail) return free_span(slab, rel & (kSlabBytes - 1));
  const std::uint32_t cap = block_bytes(cls);
  const std::uint64_t within = rel & (kSlabBytes - 1);
  if ((within & (cap - 1)) != 0) return Status::BadRequest;  // mid-block
  const auto index = static_cast<std::uint32_t>(within >> (kMinBlockShift + cls));
  if (((s.live_bits[index / 64] >> (index % 64)) & 1) == 0) return Status::BadRequest;  // not live
  const std::uint32_t n = blocks_per_slab(cls);

  s.live_bits[index / 64] &= ~(std::uint64_t{1} << (index % 64));
  if (s.live == n) list_push(partial_[cls], slab);  // was full: has room again
  --s.live;
  allocated_ -= cap;
  --live_blocks_;
  if (s.live == 0 && kept_[cls] == kNone) {
    // Wholly free and the class has none kept: kept formatted (and free).
    kept_[cls] = slab;
    ++free_slab_count_;
    s.free_index[s.free_top++] = index;
  } else if (s.live == 0) {
    // Wholly free: back to the shared pool so other classes can use it.
    list_remove(partial_[cls], slab);
    s.size_class = kPoolClass;
    s.free_top = 0;
    list_push(free_pool_, slab);
    ++free_slab_count_;
  } else {
    s.free_index[s.free_top++] = index;
  }
  return Status::Ok;
}

std::uint32_t SlabAllocator::take_kept() noexcept {
  for (std::uint32_t cls = 0; cls < kSizeClassCount; ++cls) {
    const std::uint32_t slab = kept_[cls];
    if (slab == kNone) continue;
    kept_[cls] = kNone;
    list_remove(partial_[cls], slab);
    slabs_[slab].size_class = kPoolClass;
    slabs_[slab].free_top = 0;
    return slab;
  }
  return kNone;
}

std::uint32_t SlabAllocator::live_capacity(std::uint64_t offset) const noexcept {
  if (offset < base_) return 0;
  const std::uint64_t rel = offset - base_;
  if (rel >= bytes()) return 0;
  const Slab& s = slabs_[rel >> kSlabShift];
  if (s.size_class == kPoolClass || s.size_class == kSpanTail) return 0;
  if (s.size_class == kSpanHead) return (rel & (kSlabBytes - 1)) == 0 ? s.span << kSlabShift : 0;
  const std::uint32_t cap = block_bytes(s.size_class);
  const std::uint64_t within = rel & (kSlabBytes - 1);
  if ((within & (cap - 1)) != 0) return 0;  // mid-block
  const auto index = static_cast<std::uint32_t>(within >> (kMinBlockShift + s.size_class));
  const bool live = (s.live_bits[index / 64] >> (index % 64)) & 1;
  return live ? cap : 0;
}

std::uint32_t SlabAllocator::class_capacity(std::uint32_t length) noexcept {
  if (length == 0 || length > kSlabBytes) return 0;
  return block_bytes(class_of(length));
}

AllocatorStats SlabAllocator::stats() const noexcept {
  return AllocatorStats{
      .arena_bytes = bytes(),
      .quota_bytes = quota_,
      .allocated_bytes = allocated_,
      .live_blocks = live_blocks_,
      .free_slabs = free_slab_count_,
      .failed_allocs = failed_,
  };
}

}  // namespace ferry::shm
