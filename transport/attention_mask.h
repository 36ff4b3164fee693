// A bit per connection slot of a transport whose work is owed but that
// the kernel (epoll, a CQ) will not signal again: the tcp and rdma
// backends' "attention" sets. Bits bits in 64-bit words, with a count so
// the datapath's "anything owed?" is one compare, and next() so a sweep
// visits only set bits, a word at a time. No allocation; not thread-safe
// (one owner, like the datapath that holds it).
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace ferry::transport {

template <std::uint32_t Bits>
class AttentionMask {
  static_assert(Bits > 0 && Bits % 64 == 0, "the attention mask is whole 64-bit words");

 public:
  static constexpr std::uint32_t kBits = Bits;
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

  // slot < Bits (the caller's slot numbers are bounded by the same constant).
  void set(std::uint32_t slot) noexcept {
    std::uint64_t& w = words_[slot / 64];
    const std::uint64_t bit = 1ull << (slot % 64);
    if ((w & bit) == 0) ++count_;
    w |= bit;
  }
  void clear(std::uint32_t slot) noexcept {
    std::uint64_t& w = words_[slot / 64];
    const std::uint64_t bit = 1ull << (slot % 64);
    if ((w & bit) != 0) --count_;
    w &= ~bit;
  }
  bool test(std::uint32_t slot) const noexcept { return (words_[slot / 64] >> (slot % 64) & 1u) != 0; }
  bool any() const noexcept { return count_ != 0; }
  std::uint32_t count() const noexcept { return count_; }
  // The first set slot >= from, or kNone.
  std::uint32_t next(std::uint32_t from) const noexcept {
    if (from >= Bits) return kNone;
    std::uint32_t i = from / 64;
    std::uint64_t w = words_[i] & (~0ull << (from % 64));
    for (;;) {
      if (w != 0) return i * 64 + static_cast<std::uint32_t>(std::countr_zero(w));
      if (++i == kWords) return kNone;
      w = words_[i];
    }
  }
  void reset() noexcept {
    words_ = {};
    count_ = 0;
  }

 private:
  static constexpr std::uint32_t kWords = Bits / 64;
  std::array<std::uint64_t, kWords> words_{};
  std::uint32_t count_ = 0;
};

}  // namespace ferry::transport
