// Little-endian loads and stores for the wire format. Byte-wise on purpose:
// no alignment assumptions, no host-endianness assumptions, and compilers
// turn each into one mov on x86.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::wire {

inline void store_le16(std::byte* p, std::uint16_t v) noexcept {
  p[0] = std::byte(v & 0xff);
  p[1] = std::byte(v >> 8);
}
inline void store_le32(std::byte* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = std::byte((v >> (8 * i)) & 0xff);
}
inline void store_le64(std::byte* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = std::byte((v >> (8 * i)) & 0xff);
}
inline std::uint16_t load_le16(const std::byte* p) noexcept {
  return static_cast<std::uint16_t>(std::to_integer<std::uint16_t>(p[0]) | (std::to_integer<std::uint16_t>(p[1]) << 8));
}
inline std::uint32_t load_le32(const std::byte* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::to_integer<std::uint32_t>(p[i]) << (8 * i);
  return v;
}
inline std::uint64_t load_le64(const std::byte* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::to_integer<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace ferry::wire
