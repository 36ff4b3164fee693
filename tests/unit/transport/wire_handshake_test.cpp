// Handshake payload: round trip, every range check, negotiation.
#include <algorithm>
#include <array>
#include <cstddef>

#include <catch2/catch.hpp>

#include "transport/wire/endian.h"
#include "wire_samples.h"

using namespace ferry;
using namespace ferry::wire;
using ferry::wire::testing::valid_handshake;

namespace {

std::array<std::byte, kHandshakeMaxWithRails> buf;

std::span<const std::byte> enc(const Handshake& hs) {
  buf.fill(std::byte{0});
  const std::size_t n = encode_handshake(hs, buf);
  REQUIRE(n == handshake_bytes(hs));
  return {buf.data(), n};
}

WireError dec(const Handshake& hs) {
  Handshake out;
  return decode_handshake(enc(hs), out);
}

}  // namespace

TEST_CASE("handshake round trip without and with a nonce", "[wire][handshake]") {
  Handshake hs = valid_handshake();
  Handshake back;
  REQUIRE(decode_handshake(enc(hs), back) == WireError::None);
  CHECK(back == hs);
  CHECK(enc(hs).size() == kHandshakeBaseBytes);

  hs.has_nonce = true;
  for (std::size_t i = 0; i < kAuthNonceBytes; ++i) hs.auth_nonce[i] = static_cast<std::uint8_t>(0xA0 + i);
  hs.capabilities |= kCapAuth;
  REQUIRE(decode_handshake(enc(hs), back) == WireError::None);
  CHECK(back == hs);
  CHECK(enc(hs).size() == kHandshakeNonceBytes);
  CHECK_FALSE(back.has_proof);
}

TEST_CASE("handshake round trip with nonce and proof", "[wire][handshake][auth]") {
  Handshake hs = valid_handshake();
  hs.has_nonce = true;
  hs.has_proof = true;
  hs.capabilities |= kCapAuth;
  for (std::size_t i = 0; i < kAuthNonceBytes; ++i) hs.auth_nonce[i] = static_cast<std::uint8_t>(0xA0 + i);
  for (std::size_t i = 0; i < kAuthProofBytes; ++i) hs.auth_proof[i] = static_cast<std::uint8_t>(0x30 + i);
  const auto b = enc(hs);
  CHECK(b.size() == kHandshakeProofBytes);
  CHECK(load_le16(b.data() + 2) == (kHandshakeHasNonce | kHandshakeHasProof));
  CHECK(std::to_integer<int>(b[kHandshakeNonceBytes]) == 0x30);
  CHECK(std::to_integer<int>(b[kHandshakeProofBytes - 1]) == 0x30 + kAuthProofBytes - 1);
  Handshake back;
  REQUIRE(decode_handshake(b, back) == WireError::None);
  CHECK(back == hs);
}

TEST_CASE("handshake round trip with nonce, proof and connection nonce", "[wire][handshake][auth]") {
  Handshake hs = valid_handshake();
  hs.has_nonce = true;
  hs.has_proof = true;
  hs.has_conn_nonce = true;
  hs.capabilities |= kCapAuth;
  for (std::size_t i = 0; i < kAuthNonceBytes; ++i) hs.auth_nonce[i] = static_cast<std::uint8_t>(0xA0 + i);
  for (std::size_t i = 0; i < kAuthProofBytes; ++i) hs.auth_proof[i] = static_cast<std::uint8_t>(0x30 + i);
  for (std::size_t i = 0; i < kAuthNonceBytes; ++i) hs.conn_nonce[i] = static_cast<std::uint8_t>(0xC0 + i);
  const auto b = enc(hs);
  CHECK(b.size() == kHandshakeMaxBytes);
  CHECK(load_le16(b.data() + 2) == (kHandshakeHasNonce | kHandshakeHasProof | kHandshakeHasConnNonce));
  CHECK(std::to_integer<int>(b[kHandshakeProofBytes]) == 0xC0);
  Handshake back;
  REQUIRE(decode_handshake(b, back) == WireError::None);
  CHECK(back == hs);
  // The connection nonce needs the proof, on the wire and when encoding.
  store_le16(buf.data() + 2, kHandshakeHasNonce | kHandshakeHasConnNonce);
  CHECK(decode_handshake(std::span<const std::byte>(buf.data(), kHandshakeMaxBytes), back) == WireError::BadFlags);
  hs.has_proof = false;
  std::array<std::byte, kHandshakeMaxBytes> out{};
  CHECK(encode_handshake(hs, out) == 0);
}

TEST_CASE("handshake proof needs the nonce", "[wire][handshake][auth]") {
  Handshake hs = valid_handshake();
  hs.has_proof = true;
  std::array<std::byte, kHandshakeMaxBytes> out{};
  CHECK(encode_handshake(hs, out) == 0);  // refused, not silently half-written
  // On the wire: proof flag without the nonce flag, at every length.
  hs.has_nonce = true;
  enc(hs);
  store_le16(buf.data() + 2, kHandshakeHasProof);
  Handshake back;
  for (std::size_t n : {kHandshakeBaseBytes, kHandshakeNonceBytes, kHandshakeProofBytes}) {
    CHECK(decode_handshake(std::span<const std::byte>(buf.data(), n), back) == WireError::BadFlags);
  }
}

TEST_CASE("handshake lengths must match the proof flag", "[wire][handshake][auth]") {
  Handshake hs = valid_handshake();
  hs.has_nonce = true;
  hs.has_proof = true;
  enc(hs);
  Handshake out;
  // Nonce and proof flagged, only the nonce present.
  CHECK(decode_handshake(std::span<const std::byte>(buf.data(), kHandshakeNonceBytes), out) == WireError::BadLength);
  // Only the nonce flagged, proof bytes present.
  store_le16(buf.data() + 2, kHandshakeHasNonce);
  CHECK(decode_handshake(std::span<const std::byte>(buf.data(), kHandshakeProofBytes), out) == WireError::BadLength);
  // Lengths between the forms, and past the largest.
  store_le16(buf.data() + 2, kHandshakeHasNonce | kHandshakeHasProof);
  std::array<std::byte, kHandshakeMaxWithRails + 1> big{};
  std::copy(buf.begin(), buf.end(), big.begin());
  for (std::size_t n : {kHandshakeNonceBytes + 1, kHandshakeProofBytes - 1, kHandshakeProofBytes + 1,
                        kHandshakeMaxBytes, kHandshakeMaxBytes + 1, kHandshakeMaxWithRails + 1}) {
    CHECK(decode_handshake(std::span<const std::byte>(big.data(), n), out) == WireError::BadLength);
  }
}

TEST_CASE("handshake encode refuses a short buffer", "[wire][handshake]") {
  std::array<std::byte, kHandshakeBaseBytes - 1> small{};
  CHECK(encode_handshake(valid_handshake(), small) == 0);
}

TEST_CASE("handshake length must match one form and the nonce flag", "[wire][handshake]") {
  Handshake hs = valid_handshake();
  Handshake out;
  auto b = enc(hs);
  CHECK(decode_handshake(b.first(kHandshakeBaseBytes - 1), out) == WireError::BadLength);
  CHECK(decode_handshake(std::span<const std::byte>(buf.data(), kHandshakeBaseBytes + 1), out) == WireError::BadLength);
  // Flag says nonce, length says none.
  store_le16(buf.data() + 2, kHandshakeHasNonce);
  CHECK(decode_handshake(std::span<const std::byte>(buf.data(), kHandshakeBaseBytes), out) == WireError::BadLength);
  // Length says nonce, flag says none.
  store_le16(buf.data() + 2, 0);
  CHECK(decode_handshake(std::span<const std::byte>(buf.data(), kHandshakeNonceBytes), out) == WireError::BadLength);
}

TEST_CASE("handshake reserved fields and unknown flags", "[wire][handshake]") {
  Handshake out;
  auto b = enc(valid_handshake());
  store_le16(buf.data() + 2, 0x8000);
  CHECK(decode_handshake(b, out) == WireError::BadFlags);
  b = enc(valid_handshake());
  store_le16(buf.data() + 6, 1);
  CHECK(decode_handshake(b, out) == WireError::ReservedNonZero);
}

TEST_CASE("handshake field ranges", "[wire][handshake]") {
  // Every range check holds in each of the three forms.
  const int form = GENERATE(0, 1, 2);
  Handshake hs = valid_handshake();
  hs.has_nonce = form >= 1;
  hs.has_proof = form == 2;
  SECTION("version 0") {
    hs.protocol_version = 0;
    CHECK(dec(hs) == WireError::BadVersion);
  }
  SECTION("qp_count 0") {
    hs.qp_count = 0;
    CHECK(dec(hs) == WireError::BadField);
  }
  SECTION("qp_count above max") {
    hs.qp_count = kMaxQpsPerChannel + 1;
    CHECK(dec(hs) == WireError::BadField);
  }
  SECTION("qp_count at max") {
    hs.qp_count = kMaxQpsPerChannel;
    CHECK(dec(hs) == WireError::None);
  }
  SECTION("epoch 0") {
    hs.daemon_epoch = 0;
    CHECK(dec(hs) == WireError::BadField);
  }
  SECTION("credits 0") {
    hs.initial_credits = 0;
    CHECK(dec(hs) == WireError::BadField);
  }
  SECTION("credits above max") {
    hs.initial_credits = kMaxInitialCredits + 1;
    CHECK(dec(hs) == WireError::BadField);
  }
  SECTION("max message too small") {
    hs.max_message_bytes = kMinMessageBytes - 1;
    CHECK(dec(hs) == WireError::BadField);
  }
  SECTION("max message too large") {
    hs.max_message_bytes = kMaxPayloadBytes + 1;
    CHECK(dec(hs) == WireError::BadField);
  }
}

TEST_CASE("unknown capability bits are dropped, known ones kept", "[wire][handshake]") {
  Handshake hs = valid_handshake();
  hs.capabilities = kCapRdma | (1ull << 40) | (1ull << 63);
  Handshake out;
  REQUIRE(decode_handshake(enc(hs), out) == WireError::None);
  CHECK(out.capabilities == kCapRdma);
}

TEST_CASE("negotiation takes the common subset", "[wire][handshake]") {
  Handshake a = valid_handshake();
  Handshake b = valid_handshake();
  a.protocol_version = 3;
  b.qp_count = 2;
  b.capabilities = kCapTcp | kCapRendezvousRead;
  b.max_message_bytes = 64 * 1024;
  Negotiated n;
  REQUIRE(negotiate(a, b, n) == WireError::None);
  CHECK(n.protocol_version == kProtocolVersion);
  CHECK(n.qp_count == 2);
  CHECK(n.capabilities == kCapTcp);
  CHECK(n.max_message_bytes == 64 * 1024);
  b.protocol_version = 0;
  CHECK(negotiate(a, b, n) == WireError::BadVersion);
}

TEST_CASE("handshake rails block: round trip after every form, and its checks", "[wire][handshake][rails]") {
  for (int form = 0; form < 4; ++form) {
    Handshake hs = valid_handshake();
    hs.has_nonce = form >= 1;
    hs.has_proof = form >= 2;
    hs.has_conn_nonce = form >= 3;
    if (hs.has_nonce) hs.capabilities |= kCapAuth;
    if (hs.has_conn_nonce) hs.conn_nonce[0] = 7;
    hs.rail_count = 2;
    hs.rail_ipv4 = {0x010012c6u, 0x010112c6u, 0, 0};  // 198.18.0.1, 198.18.1.1 as s_addr
    const std::size_t without = handshake_bytes(hs) - kHandshakeRailsBytes;
    Handshake back;
    INFO("form " << form);
    REQUIRE(decode_handshake(enc(hs), back) == WireError::None);
    CHECK(back == hs);
    CHECK(enc(hs).size() == without + kHandshakeRailsBytes);
    CHECK(back.rail_count == 2);
    CHECK(back.rail_ipv4[1] == 0x010112c6u);
  }
  Handshake hs = valid_handshake();
  hs.rail_count = 2;
  hs.rail_ipv4 = {1, 2, 0, 0};
  Handshake out;
  auto b = enc(hs);
  // Without the flag the same bytes are too long; without the block too short.
  store_le16(buf.data() + 2, 0);
  CHECK(decode_handshake(b, out) == WireError::BadLength);
  b = enc(hs);
  CHECK(decode_handshake(b.first(kHandshakeBaseBytes), out) == WireError::BadLength);
  b = enc(hs);
  buf[kHandshakeBaseBytes] = std::byte{0};  // count 0
  CHECK(decode_handshake(b, out) == WireError::BadField);
  b = enc(hs);
  buf[kHandshakeBaseBytes] = std::byte{5};  // over kMaxHandshakeRails
  CHECK(decode_handshake(b, out) == WireError::BadField);
  b = enc(hs);
  buf[kHandshakeBaseBytes + 1] = std::byte{1};  // reserved
  CHECK(decode_handshake(b, out) == WireError::ReservedNonZero);
  b = enc(hs);
  store_le32(buf.data() + kHandshakeBaseBytes + 4 + 4 * 2, 9);  // an address past the count
  CHECK(decode_handshake(b, out) == WireError::BadField);
  b = enc(hs);
  store_le32(buf.data() + kHandshakeBaseBytes + 4 + 4 * 1, 0);  // a used address 0
  CHECK(decode_handshake(b, out) == WireError::BadField);
  hs.rail_count = 5;
  std::array<std::byte, kHandshakeMaxWithRails> big{};
  CHECK(encode_handshake(hs, big) == 0);
}
