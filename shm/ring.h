// Single-producer/single-consumer ring shared across a protection boundary
// (client process <-> ferryd). The ring header lives in shared memory; each
// side keeps its own authoritative copy of the index it owns and treats the
// other side's index as untrusted input (clamped, never used unmasked).
//
// Memory ordering: the producer writes entries, then publishes `head` with a
// release store; the consumer reads `head` with acquire, copies entries out,
// then publishes `tail` with release. Entries are copied out before anyone
// validates them, so a hostile peer cannot change an entry after the check.
//
// Doorbell: a consumer about to sleep sets `consumer_waiting` and re-checks
// for work (Dekker style); a producer publishes and rings the eventfd only
// when the flag is set. Both sides use seq_cst operations for that check. So a busy pair never
// makes a syscall and a sleeping side never misses a wake-up.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace ferry::shm {

inline constexpr std::size_t kCacheLine = 64;

// Lives in shared memory. Producer-owned and consumer-owned words sit on
// separate cache lines so the two sides never false-share.
struct RingHeader {
  alignas(kCacheLine) std::atomic<std::uint32_t> head;  // written by producer only
  alignas(kCacheLine) std::atomic<std::uint32_t> tail;  // written by consumer only
  // Written by the consumer only, beside tail: what it let go of that the
  // producer counts (a CQ: the inline deliveries the client released).
  std::atomic<std::uint32_t> released;
  alignas(kCacheLine) std::atomic<std::uint32_t> consumer_waiting;  // consumer sets, producer reads
  std::uint8_t pad_[kCacheLine - sizeof(std::atomic<std::uint32_t>)];
};
static_assert(std::is_standard_layout_v<RingHeader>);
static_assert(sizeof(RingHeader) == 3 * kCacheLine);
static_assert(offsetof(RingHeader, head) == 0);
static_assert(offsetof(RingHeader, tail) == kCacheLine);
static_assert(offsetof(RingHeader, released) == kCacheLine + 4);
static_assert(offsetof(RingHeader, consumer_waiting) == 2 * kCacheLine);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

constexpr bool is_power_of_two(std::uint32_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }

// Zeroes a ring header; call once, by the side that creates the segment,
// before the other side maps it.
inline void ring_init(RingHeader* h) noexcept {
  h->head.store(0, std::memory_order_relaxed);
  h->tail.store(0, std::memory_order_relaxed);
  h->released.store(0, std::memory_order_relaxed);
  h->consumer_waiting.store(0, std::memory_order_relaxed);
}

// Producer side. Owned by exactly one thread of one process.
template <typename Entry>
class RingProducer {
  static_assert(std::is_trivially_copyable_v<Entry>);

 public:
  RingProducer() = default;
  // `capacity` comes from the creator's own configuration, never re-read
  // from shared memory.
  RingProducer(RingHeader* header, Entry* entries, std::uint32_t capacity) noexcept
      : h_(header),
        e_(entries),
        mask_(capacity - 1),
        head_(header->head.load(std::memory_order_relaxed)),
        seen_tail_(head_ - capacity) {}

  std::uint32_t capacity() const noexcept { return mask_ + 1; }

  // Free slots as seen now (the consumer's tail read again). A hostile
  // consumer that publishes a nonsensical tail makes the ring look full,
  // which only starves itself; the slots it said were free before stay so
  // (has_room).
  std::uint32_t free_slots() noexcept {
    std::uint32_t tail = h_->tail.load(std::memory_order_acquire);
    std::uint32_t used = head_ - tail;
    const std::uint32_t room = used > capacity() ? 0 : capacity() - used;
    seen_tail_ = head_ - (capacity() - room);
    return room;
  }

  // Whether `n` slots are free. Reads the consumer's tail (a cache line
  // the consumer writes) only when the last one read leaves too little.
  bool has_room(std::uint32_t n) noexcept { return capacity() - (head_ - seen_tail_) >= n || free_slots() >= n; }

  // Copies up to n entries in; returns how many fit. Publishes once.
  std::uint32_t push_batch(const Entry* src, std::uint32_t n) noexcept {
    std::uint32_t room = capacity() - (head_ - seen_tail_);
    if (room < n) room = free_slots();
    if (n > room) n = room;
    for (std::uint32_t i = 0; i < n; ++i) e_[(head_ + i) & mask_] = src[i];
    if (n != 0) {
      head_ += n;
      h_->head.store(head_, std::memory_order_release);
    }
    return n;
  }

  bool try_push(const Entry& entry) noexcept {
    if (!has_room(1)) return false;
    e_[head_ & mask_] = entry;
    h_->head.store(++head_, std::memory_order_release);
    return true;
  }

  // A record: `entry` and then `bytes` of raw data in the slots after it
  // (the last one padded with zeros), published together. False, and
  // nothing written, when the 1 + ceil(bytes / sizeof(Entry)) slots do not
  // all fit.
  bool try_push_record(const Entry& entry, const std::byte* data, std::uint32_t bytes) noexcept {
    constexpr std::uint32_t kSlot = sizeof(Entry);
    const std::uint32_t full = bytes / kSlot, rest = bytes % kSlot;
    if (!has_room(1 + full + (rest != 0 ? 1 : 0))) return false;
    std::uint32_t at = head_;
    e_[at++ & mask_] = entry;
    for (std::uint32_t i = 0; i < full; ++i) std::memcpy(&e_[at++ & mask_], data + i * kSlot, kSlot);
    if (rest != 0) {
      Entry last{};  // the padding is zeros
      std::memcpy(&last, data + full * kSlot, rest);
      e_[at++ & mask_] = last;
    }
    head_ = at;
    h_->head.store(head_, std::memory_order_release);
    return true;
  }

  // What the consumer says it released (RingHeader::released): untrusted.
  std::uint32_t consumer_released() const noexcept { return h_->released.load(std::memory_order_acquire); }

  // After publishing: true when the consumer announced it is going to sleep
  // and must be woken through its doorbell, which the caller then rings.
  // Claims the announcement (clears the flag): one ring per sleep, however
  // many entries follow before the consumer wakes; the consumer re-checks
  // the ring after its next announcement, so nothing published after this
  // claim can be slept through.
  bool claim_doorbell() noexcept {
    // A seq_cst read-modify-write of our own index instead of a bare fence:
    // the same full barrier on x86 (lock xadd), and ThreadSanitizer models it
    // (gcc's TSan does not support atomic_thread_fence).
    h_->head.fetch_add(0, std::memory_order_seq_cst);
    if (h_->consumer_waiting.load(std::memory_order_seq_cst) == 0) return false;  // the common, awake case: no RMW
    return h_->consumer_waiting.exchange(0, std::memory_order_seq_cst) != 0;
  }

 private:
  RingHeader* h_ = nullptr;
  Entry* e_ = nullptr;
  std::uint32_t mask_ = 0;
  std::uint32_t head_ = 0;  // authoritative copy; shared memory holds the published one
  // A tail no later than the consumer's (has_room): where free_slots() last
  // saw it, or at first as far behind as the ring is long.
  std::uint32_t seen_tail_ = 0;
};

// Consumer side. Owned by exactly one thread of one process.
template <typename Entry>
class RingConsumer {
  static_assert(std::is_trivially_copyable_v<Entry>);

 public:
  RingConsumer() = default;
  RingConsumer(RingHeader* header, Entry* entries, std::uint32_t capacity) noexcept
      : h_(header), e_(entries), mask_(capacity - 1), tail_(header->tail.load(std::memory_order_relaxed)) {}

  std::uint32_t capacity() const noexcept { return mask_ + 1; }

  // Entries ready now. A producer that publishes a head more than one ring
  // ahead is lying; `corrupt()` reports it and nothing is consumed.
  std::uint32_t ready() noexcept {
    std::uint32_t head = h_->head.load(std::memory_order_acquire);
    std::uint32_t avail = head - tail_;
    if (avail > capacity()) {
      corrupt_ = true;
      return 0;
    }
    return avail;
  }

  bool corrupt() const noexcept { return corrupt_; }
  // Whether the producer published anything not yet consumed (or a head
  // that pop_batch() will find corrupt): one load, for a caller that polls
  // many rings and skips the empty ones.
  bool pending() const noexcept { return h_->head.load(std::memory_order_acquire) != tail_; }

 private:
  std::uint32_t ready_seq_cst() noexcept {
    std::uint32_t avail = h_->head.load(std::memory_order_seq_cst) - tail_;
    if (avail > capacity()) {
      corrupt_ = true;
      return 0;
    }
    return avail;
  }

 public:
  // Copies up to max entries out of shared memory and releases their slots.
  std::uint32_t pop_batch(Entry* dst, std::uint32_t max) noexcept {
    std::uint32_t n = ready();
    if (n > max) n = max;
    for (std::uint32_t i = 0; i < n; ++i) dst[i] = e_[(tail_ + i) & mask_];
    if (n != 0) {
      tail_ += n;
      h_->tail.store(tail_, std::memory_order_release);
    }
    return n;
  }

  // Copies the next `bytes` of raw data (the slots after a record's entry,
  // try_push_record) out and releases their slots. False, and nothing
  // consumed, when they are not all published.
  bool pop_bytes(std::byte* dst, std::uint32_t bytes) noexcept {
    const std::uint32_t slots = (bytes + sizeof(Entry) - 1) / sizeof(Entry);
    if (ready() < slots) return false;
    for (std::uint32_t i = 0; i < slots; ++i) {
      const std::uint32_t at = i * static_cast<std::uint32_t>(sizeof(Entry));
      const std::uint32_t n = bytes - at < sizeof(Entry) ? bytes - at : static_cast<std::uint32_t>(sizeof(Entry));
      std::memcpy(dst + at, &e_[(tail_ + i) & mask_], n);
    }
    tail_ += slots;
    h_->tail.store(tail_, std::memory_order_release);
    return true;
  }

  // Publishes RingHeader::released (the consumer's own running count).
  void publish_released(std::uint32_t count) noexcept { h_->released.store(count, std::memory_order_release); }

  // Sleep protocol, consumer side: call prepare_to_sleep(); if it returns
  // true the ring is still empty and the caller may block on its doorbell;
  // call woke_up() after the wait (or when it decides not to wait).
  bool prepare_to_sleep() noexcept {
    // seq_cst exchange + seq_cst load pair with the producer's seq_cst
    // read-modify-write + load: one of the two sides must see the other.
    h_->consumer_waiting.exchange(1, std::memory_order_seq_cst);
    if (ready_seq_cst() != 0 || corrupt_) {
      h_->consumer_waiting.store(0, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  void woke_up() noexcept { h_->consumer_waiting.store(0, std::memory_order_relaxed); }
  // Whether the announcement still stands: a producer that published since
  // claimed it (and rang). Not standing: announce again before sleeping.
  bool announced() const noexcept { return h_->consumer_waiting.load(std::memory_order_seq_cst) != 0; }

 private:
  RingHeader* h_ = nullptr;
  Entry* e_ = nullptr;
  std::uint32_t mask_ = 0;
  std::uint32_t tail_ = 0;
  bool corrupt_ = false;
};

}  // namespace ferry::shm
