// An open-addressing map from 64-bit keys to dense slot numbers (linear
// probing, power-of-two capacity, load factor at most 1/2). Used by a shard
// (key -> its row) and by a worker (key -> its position in one request).
// Slots are numbered in insertion order, so a shard's rows live in one
// growing array and a worker's unique keys come out in first-seen order.
// Sized at set-up; grows only when inserting past the reserved count (a
// shard table of unbounded keys), never for a worker's bounded request.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ferry/ps/table.h"

namespace ferry::ps::detail {

class KeyIndex {
 public:
  static constexpr std::uint32_t kNone = UINT32_MAX;

  explicit KeyIndex(std::uint64_t expected = 8) { reserve(expected); }

  // Room for `expected` keys without growing.
  void reserve(std::uint64_t expected) {
    const std::uint64_t cap = capacity_for(expected);
    if (cap > mask_ + 1) rehash(cap);
  }

  // Forgets every key and sizes the table for `expected` keys, in O(1): a
  // worker resets it per request, and an entry whose stamp is not the
  // current one is empty (no clearing of the slots in between; all are
  // cleared once when the 32-bit stamp wraps). Allocates only when
  // `expected` exceeds every earlier size.
  void reset(std::uint64_t expected) {
    const std::uint64_t cap = capacity_for(expected);
    if (cap > slots_.size()) slots_.resize(cap);
    mask_ = cap - 1;
    if (++stamp_ == 0) {
      std::fill(slots_.begin(), slots_.end(), Entry{});
      stamp_ = 1;
    }
    size_ = 0;
  }

  // The key's slot, or kNone.
  std::uint32_t find(Key key) const noexcept {
    for (std::uint64_t i = bucket(key);; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.stamp != stamp_) return kNone;
      if (e.key == key) return e.slot;
    }
  }

  // The key's slot; a new key gets the next slot number (`*inserted` says so).
  std::uint32_t insert(Key key, bool* inserted) {
    if (2 * (std::uint64_t{size_} + 1) > mask_ + 1) rehash(2 * (mask_ + 1));
    for (std::uint64_t i = bucket(key);; i = (i + 1) & mask_) {
      Entry& e = slots_[i];
      if (e.stamp != stamp_) {
        e = Entry{key, size_++, stamp_};
        *inserted = true;
        return e.slot;
      }
      if (e.key == key) {
        *inserted = false;
        return e.slot;
      }
    }
  }

  std::uint32_t size() const noexcept { return size_; }
  // Heap bytes the table holds (its slots).
  std::size_t bytes() const noexcept { return slots_.capacity() * sizeof(Entry); }

 private:
  struct Entry {
    Key key = 0;
    std::uint32_t slot = 0;
    std::uint32_t stamp = 0;  // live when it equals stamp_ (never 0); in the padding of {key, slot}
  };
  static_assert(sizeof(Entry) == 16);

  static std::uint64_t capacity_for(std::uint64_t expected) noexcept {
    std::uint64_t cap = 16;
    while (cap < 2 * expected) cap <<= 1;
    return cap;
  }

  // The low bits of the hash: shard placement uses the high ones.
  std::uint64_t bucket(Key key) const noexcept { return mix64(key) & mask_; }

  void rehash(std::uint64_t cap) {
    std::vector<Entry> old(cap);
    old.swap(slots_);
    const std::uint64_t old_cap = std::min<std::uint64_t>(old.size(), mask_ + 1);  // the live prefix
    mask_ = cap - 1;
    for (std::uint64_t o = 0; o < old_cap; ++o) {
      const Entry& e = old[o];
      if (e.stamp != stamp_) continue;
      for (std::uint64_t i = bucket(e.key);; i = (i + 1) & mask_) {
        if (slots_[i].stamp != stamp_) {
          slots_[i] = e;
          break;
        }
      }
    }
  }

  std::vector<Entry> slots_;
  std::uint64_t mask_ = 0;
  std::uint32_t size_ = 0;
  std::uint32_t stamp_ = 1;
};

}  // namespace ferry::ps::detail
