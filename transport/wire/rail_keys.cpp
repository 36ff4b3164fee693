#include "transport/wire/rail_keys.h"

#include "transport/wire/endian.h"

namespace ferry::wire {

std::size_t encode_rail_keys(const RailKeys& rk, std::span<std::byte> out) noexcept {
  if (rk.rails == 0 || rk.rails > kMaxRailKeys || out.size() < rail_keys_bytes(rk.rails)) return 0;
  store_le64(out.data() + 0, rk.addr);
  store_le64(out.data() + 8, rk.length);
  for (std::uint32_t i = 0; i < rk.rails; ++i) store_le32(out.data() + kRailKeysFixedBytes + 4 * i, rk.rkey[i]);
  return rail_keys_bytes(rk.rails);
}

WireError decode_rail_keys(std::span<const std::byte> in, std::uint32_t rails, RailKeys& out) noexcept {
  if (rails == 0 || rails > kMaxRailKeys) return WireError::BadField;
  if (in.size() != rail_keys_bytes(rails)) return WireError::BadLength;
  RailKeys rk;
  rk.addr = load_le64(in.data() + 0);
  rk.length = load_le64(in.data() + 8);
  rk.rails = rails;
  if (rk.length == 0 || rk.addr + rk.length < rk.addr) return WireError::BadField;
  for (std::uint32_t i = 0; i < rails; ++i) rk.rkey[i] = load_le32(in.data() + kRailKeysFixedBytes + 4 * i);
  out = rk;
  return WireError::None;
}

}  // namespace ferry::wire
