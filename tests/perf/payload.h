// Payload patterns so a broken data path cannot report fast numbers: the
// request and the response carry different fixed patterns, and the first
// bytes of each carry the operation's sequence number. Every response's
// stamp is checked; every kVerifyEvery-th response is compared in full.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ferry::bench {

inline constexpr std::uint64_t kVerifyEvery = 64;
inline constexpr std::uint8_t kRequestSeed = 0x5a;
inline constexpr std::uint8_t kResponseSeed = 0xc3;

inline void fill_pattern(std::byte* p, std::size_t size, std::uint8_t seed) noexcept {
  for (std::size_t i = 0; i < size; ++i) p[i] = static_cast<std::byte>((i * 131u + seed) & 0xffu);
}

inline void stamp(std::byte* p, std::size_t size, std::uint64_t seq) noexcept {
  std::memcpy(p, &seq, size < sizeof(seq) ? size : sizeof(seq));
}

inline std::uint64_t read_stamp(const std::byte* p, std::size_t size) noexcept {
  std::uint64_t seq = 0;
  std::memcpy(&seq, p, size < sizeof(seq) ? size : sizeof(seq));
  return seq;
}

// Stamp width actually used for a size: a mask of the bytes compared.
inline std::uint64_t stamp_mask(std::size_t size) noexcept {
  return size >= 8 ? ~std::uint64_t{0} : ((std::uint64_t{1} << (8 * size)) - 1);
}

inline bool stamp_matches(const std::byte* p, std::size_t size, std::uint64_t seq) noexcept {
  return read_stamp(p, size) == (seq & stamp_mask(size));
}

// Full check against `pattern` (the unstamped expected bytes).
inline bool payload_matches(const std::byte* got, const std::byte* pattern, std::size_t size,
                            std::uint64_t seq) noexcept {
  const std::size_t head = size < 8 ? size : 8;
  return stamp_matches(got, size, seq) && std::memcmp(got + head, pattern + head, size - head) == 0;
}

}  // namespace ferry::bench
