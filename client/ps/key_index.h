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

  // Forgets every key and sizes the table for `expected` keys, in
  // O(expected): a worker resets it per request. Allocates only when
  // `expected` exceeds every earlier size.
  void reset(std::uint64_t expected) {
    const std::uint64_t cap = capacity_for(expected);
    if (cap > slots_.size()) slots_.resize(cap);
    mask_ = cap - 1;
    std::fill_n(slots_.begin(), cap, Entry{});
    size_ = 0;
  }

  // The key's slot, or kNone.
  std::uint32_t find(Key key) const noexcept {
    for (std::uint64_t i = bucket(key);; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.slot == 0) return kNone;
      if (e.key == key) return e.slot - 1;
    }
  }

  // The key's slot; a new key gets the next slot number (`*inserted` says so).
  std::uint32_t insert(Key key, bool* inserted) {
    if (2 * (std::uint64_t{size_} + 1) > mask_ + 1) rehash(2 * (mask_ + 1));
    for (std::uint64_t i = bucket(key);; i = (i + 1) & mask_) {
      Entry& e = slots_[i];
      if (e.slot == 0) {
        e.key = key;
        e.slot = ++size_;
        *inserted = true;
        return e.slot - 1;
      }
      if (e.key == key) {
        *inserted = false;
        return e.slot - 1;
      }
    }
  }

  std::uint32_t size() const noexcept { return size_; }

 private:
  struct Entry {
    Key key = 0;
    std::uint32_t slot = 0;  // slot number + 1; 0: empty
  };

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
      if (e.slot == 0) continue;
      for (std::uint64_t i = bucket(e.key);; i = (i + 1) & mask_) {
        if (slots_[i].slot == 0) {
          slots_[i] = e;
          break;
        }
      }
    }
  }

  std::vector<Entry> slots_;
  std::uint64_t mask_ = 0;
  std::uint32_t size_ = 0;
};

}  // namespace ferry::ps::detail
