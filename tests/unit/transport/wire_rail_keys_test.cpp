// RailKeys: the payload codec and the header rules of the message that
// carries it (transport/wire/rail_keys.h). Hostile input is refused with a
// reason, never read past its end.
#include <array>
#include <cstddef>
#include <vector>

#include <catch2/catch.hpp>

#include "transport/wire/endian.h"
#include "transport/wire/header.h"
#include "transport/wire/rail_keys.h"
#include "wire_samples.h"

using namespace ferry;
using namespace ferry::wire;

namespace {

RailKeys sample(std::uint32_t rails) {
  RailKeys rk;
  rk.addr = 0x7F00'0000'1000ull;
  rk.length = 64ull << 20;
  rk.rails = rails;
  for (std::uint32_t i = 0; i < rails; ++i) rk.rkey[i] = 0xA000 + i;
  return rk;
}

std::vector<std::byte> encoded(const RailKeys& rk) {
  std::vector<std::byte> b(kRailKeysMaxBytes);
  b.resize(encode_rail_keys(rk, b));
  return b;
}

}  // namespace

TEST_CASE("rail keys: every rail count round-trips") {
  for (std::uint32_t n = 1; n <= kMaxRailKeys; ++n) {
    const RailKeys rk = sample(n);
    const auto b = encoded(rk);
    REQUIRE(b.size() == rail_keys_bytes(n));
    RailKeys got;
    REQUIRE(decode_rail_keys(b, n, got) == WireError::None);
    CHECK(got == rk);
  }
}

TEST_CASE("rail keys: the encoder refuses what it cannot write") {
  std::array<std::byte, kRailKeysMaxBytes> b{};
  CHECK(encode_rail_keys(sample(0), b) == 0);
  RailKeys five = sample(4);
  five.rails = 5;
  CHECK(encode_rail_keys(five, b) == 0);
  std::array<std::byte, 19> small{};
  CHECK(encode_rail_keys(sample(1), small) == 0);
}

TEST_CASE("rail keys: hostile payloads are refused with a reason") {
  const auto good = encoded(sample(2));
  RailKeys out = sample(1);
  const RailKeys before = out;
  SECTION("zero rails or more than the maximum") {
    CHECK(decode_rail_keys(good, 0, out) == WireError::BadField);
    CHECK(decode_rail_keys(good, kMaxRailKeys + 1, out) == WireError::BadField);
    CHECK(decode_rail_keys(good, 0xFFFFFFFFu, out) == WireError::BadField);
  }
  SECTION("a size that does not match the rail count") {
    CHECK(decode_rail_keys(good, 1, out) == WireError::BadLength);
    CHECK(decode_rail_keys(good, 3, out) == WireError::BadLength);
    CHECK(decode_rail_keys(std::span<const std::byte>(good.data(), 17), 2, out) == WireError::BadLength);
    CHECK(decode_rail_keys(std::span<const std::byte>(), 1, out) == WireError::BadLength);
  }
  SECTION("an empty or wrapping range") {
    auto b = good;
    store_le64(b.data() + 8, 0);
    CHECK(decode_rail_keys(b, 2, out) == WireError::BadField);
    store_le64(b.data(), 0xFFFF'FFFF'FFFF'F000ull);
    store_le64(b.data() + 8, 0x2000);
    CHECK(decode_rail_keys(b, 2, out) == WireError::BadField);
  }
  CHECK(out == before);  // written only on success
}

TEST_CASE("rail keys: header rules") {
  Header h = testing::valid_header(MsgType::RailKeys);
  CHECK(validate_header(h, 1u << 20) == WireError::None);
  SECTION("aux is the rail count, and the payload must match it") {
    h.aux = 0;
    CHECK(validate_header(h, 1u << 20) == WireError::BadField);
    h.aux = kMaxRailKeys + 1;
    CHECK(validate_header(h, 1u << 20) == WireError::BadField);
    h.aux = 3;  // payload is for 2
    CHECK(validate_header(h, 1u << 20) == WireError::BadLength);
    h.aux = 4;
    h.payload_len = rail_keys_bytes(4);
    CHECK(validate_header(h, 1u << 20) == WireError::None);
    h.payload_len = rail_keys_bytes(4) + 4;
    CHECK(validate_header(h, 1u << 20) == WireError::BadLength);
  }
  SECTION("channel level, no token, no status, retransmit flag only") {
    Header e = h;
    e.src_ep = 1;
    CHECK(validate_header(e, 1u << 20) == WireError::MissingEndpoint);
    e = h;
    e.status = Status::Busy;
    CHECK(validate_header(e, 1u << 20) == WireError::BadStatus);
    e = h;
    e.flags = kFlagRespBuffer;
    CHECK(validate_header(e, 1u << 20) == WireError::BadFlags);
    e = h;
    e.flags = kFlagRetransmit;
    CHECK(validate_header(e, 1u << 20) == WireError::None);
  }
}
