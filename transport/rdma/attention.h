// A bit per connection slot whose completions are owed but that the CQ
// will not signal again (rdma_connections.h). kMaxConnections bits in
// words, with a count so the datapath's "anything owed?" is one compare and
// a sweep visits only set bits. No allocation.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

#include "transport/rdma/rdma_config.h"

namespace ferry::transport::rdma {

class AttentionMask {
 public:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

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
    if (from >= kMaxConnections) return kNone;
    std::uint32_t i = from / 64;
    std::uint64_t w = words_[i] & (~0ull << (from % 64));
    for (;;) {
      if (w != 0) return i * 64 + static_cast<std::uint32_t>(std::countr_zero(w));
      if (++i == kWords) return kNone;
      w = words_[i];
    }
  }

 private:
  static constexpr std::uint32_t kWords = kMaxConnections / 64;
  std::array<std::uint64_t, kWords> words_{};
  std::uint32_t count_ = 0;
};

}  // namespace ferry::transport::rdma
