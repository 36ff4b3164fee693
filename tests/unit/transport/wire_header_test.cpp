// Wire header: round trip of every message type and every rejection.
#include <array>
#include <cstddef>
#include <vector>

#include <catch2/catch.hpp>

#include "transport/wire/endian.h"
#include "wire_samples.h"

using namespace ferry;
using namespace ferry::wire;
using ferry::wire::testing::valid_header;

namespace {

constexpr std::uint32_t kMax = 1u << 20;

std::array<std::byte, kHeaderBytes> encoded(const Header& h) {
  std::array<std::byte, kHeaderBytes> b{};
  encode_header(h, b);
  return b;
}

WireError decode_bytes(const std::array<std::byte, kHeaderBytes>& b, Header* out = nullptr) {
  Header h;
  const WireError e = decode_header(b, kMax, h);
  if (out != nullptr) *out = h;
  return e;
}

WireError decode_of(const Header& h) { return decode_bytes(encoded(h)); }

}  // namespace

TEST_CASE("every message type round-trips through encode/decode", "[wire]") {
  for (std::uint8_t t = 1; t <= kMaxMsgType; ++t) {
    const auto type = static_cast<MsgType>(t);
    INFO(to_string(type));
    const Header h = valid_header(type);
    REQUIRE(validate_header(h, kMax) == WireError::None);
    Header back;
    REQUIRE(decode_bytes(encoded(h), &back) == WireError::None);
    CHECK(back == h);
    CHECK(to_string(type) != "Unknown");
  }
}

TEST_CASE("header layout is little-endian at the documented offsets", "[wire]") {
  Header h = valid_header(MsgType::Call);
  h.flags = kFlagRetransmit;
  h.payload_len = 0x00A0B0C0 & (kMax - 1);
  h.src_ep = 0x11223344;
  h.dst_ep = 0x55667788;
  h.token = 0x0807060504030201ull;
  h.credit = 0xDEADBEEF;
  const auto b = encoded(h);
  CHECK(std::to_integer<int>(b[0]) == (0xF0 | kProtocolVersion));
  CHECK(std::to_integer<int>(b[1]) == static_cast<int>(MsgType::Call));
  CHECK(std::to_integer<int>(b[2]) == kFlagRetransmit);
  CHECK(std::to_integer<int>(b[3]) == 0);
  CHECK(load_le32(&b[4]) == h.payload_len);
  CHECK(std::to_integer<int>(b[8]) == 0x44);  // least significant byte first
  CHECK(load_le32(&b[8]) == 0x11223344u);
  CHECK(load_le32(&b[12]) == 0x55667788u);
  CHECK(load_le64(&b[16]) == h.seq);
  CHECK(load_le32(&b[24]) == h.lane_seq);
  CHECK(load_le32(&b[28]) == h.ack);
  CHECK(std::to_integer<int>(b[32]) == 0x01);
  CHECK(load_le64(&b[32]) == h.token);
  CHECK(load_le32(&b[40]) == 0xDEADBEEFu);
  CHECK(load_le32(&b[44]) == 0u);
}

TEST_CASE("truncated input is rejected and the output is untouched", "[wire]") {
  const auto b = encoded(valid_header(MsgType::Send));
  for (std::size_t n = 0; n < kHeaderBytes; ++n) {
    Header out;
    out.token = 4242;
    CHECK(decode_header(std::span<const std::byte>(b.data(), n), kMax, out) == WireError::Truncated);
    CHECK(out.token == 4242u);
  }
}

TEST_CASE("magic, version, type and status bytes are checked", "[wire]") {
  auto b = encoded(valid_header(MsgType::Send));
  SECTION("bad magic") {
    b[kOffMagicVersion] = std::byte{0x01};
    CHECK(decode_bytes(b) == WireError::BadMagic);
    CHECK(to_status(WireError::BadMagic) == Status::ProtocolError);
  }
  SECTION("other version") {
    b[kOffMagicVersion] = std::byte{0xF3};
    CHECK(decode_bytes(b) == WireError::BadVersion);
    b[kOffMagicVersion] = std::byte{0xF1};  // version 1: lane proofs not bound to their connection
    CHECK(decode_bytes(b) == WireError::BadVersion);
    CHECK(to_status(WireError::BadVersion) == Status::VersionMismatch);
  }
  SECTION("type 0 and above the range") {
    b[kOffType] = std::byte{0};
    CHECK(decode_bytes(b) == WireError::BadType);
    b[kOffType] = std::byte{kMaxMsgType + 1};
    CHECK(decode_bytes(b) == WireError::BadType);
    b[kOffType] = std::byte{0xFF};
    CHECK(decode_bytes(b) == WireError::BadType);
  }
  SECTION("status above kMaxStatus") {
    auto r = encoded(valid_header(MsgType::Response));
    r[kOffStatus] = std::byte{kMaxStatus + 1};
    CHECK(decode_bytes(r) == WireError::BadStatus);
  }
}

TEST_CASE("flags: unknown bits and flags the type does not allow", "[wire]") {
  for (std::uint8_t t = 1; t <= kMaxMsgType; ++t) {
    Header h = valid_header(static_cast<MsgType>(t));
    INFO(to_string(h.type));
    for (int bit = 2; bit < 8; ++bit) {
      h.flags = static_cast<std::uint8_t>(1u << bit);
      // An OpenAck may say the peer serves the service on another engine.
      const bool redirect = h.type == MsgType::OpenAck && h.flags == kFlagRedirect;
      CHECK(decode_of(h) == (redirect ? WireError::None : WireError::BadFlags));
    }
  }
  Header beat = valid_header(MsgType::Heartbeat);
  beat.flags = kFlagRetransmit;
  CHECK(decode_of(beat) == WireError::BadFlags);
  Header rejoin = valid_header(MsgType::Hello);  // a lane replacing a broken one
  rejoin.flags = kFlagRetransmit;
  CHECK(decode_of(rejoin) == WireError::None);
  Header send = valid_header(MsgType::Send);
  send.flags = kFlagRespBuffer;  // only Call may carry a response buffer
  CHECK(decode_of(send) == WireError::BadFlags);
  send.flags = kFlagRetransmit;
  CHECK(decode_of(send) == WireError::None);
}

TEST_CASE("status: only responses and acks carry one; Error must", "[wire]") {
  for (MsgType t : {MsgType::Hello, MsgType::Heartbeat, MsgType::Credit, MsgType::Open, MsgType::Send, MsgType::Call,
                    MsgType::RendezvousReq, MsgType::Resync}) {
    Header h = valid_header(t);
    h.status = Status::PeerReset;
    INFO(to_string(t));
    CHECK(decode_of(h) == WireError::BadStatus);
  }
  for (MsgType t : {MsgType::HelloAck, MsgType::OpenAck, MsgType::Close, MsgType::Response, MsgType::ReadDone,
                    MsgType::WriteDone, MsgType::Goodbye}) {
    Header h = valid_header(t);
    h.status = Status::ServiceNotFound;
    if (t == MsgType::OpenAck) h.src_ep = 0;  // a refused open names no endpoint
    INFO(to_string(t));
    CHECK(decode_of(h) == WireError::None);
  }
  Header err = valid_header(MsgType::Error);
  err.status = Status::Ok;
  CHECK(decode_of(err) == WireError::BadStatus);
}

TEST_CASE("payload length limits per type and per channel", "[wire]") {
  SECTION("messages without a payload") {
    for (MsgType t : {MsgType::Heartbeat, MsgType::Credit, MsgType::OpenAck, MsgType::Close, MsgType::ReadDone,
                      MsgType::WriteDone, MsgType::Resync, MsgType::Goodbye}) {
      Header h = valid_header(t);
      h.payload_len = 1;
      INFO(to_string(t));
      CHECK(decode_of(h) == WireError::BadLength);
    }
  }
  SECTION("handshake sizes") {
    Header h = valid_header(MsgType::Hello);
    h.payload_len = kHandshakeMaxBytes;
    CHECK(decode_of(h) == WireError::None);
    h.payload_len = kHandshakeBaseBytes - 1;
    CHECK(decode_of(h) == WireError::BadLength);
    h.payload_len = kHandshakeMaxWithRails + 1;
    CHECK(decode_of(h) == WireError::BadLength);
  }
  SECTION("open: 1..kMaxServiceNameBytes") {
    Header h = valid_header(MsgType::Open);
    h.payload_len = 0;
    CHECK(decode_of(h) == WireError::BadLength);
    h.payload_len = kMaxServiceNameBytes;
    CHECK(decode_of(h) == WireError::None);
    h.payload_len = kMaxServiceNameBytes + 1;
    CHECK(decode_of(h) == WireError::BadLength);
  }
  SECTION("error text bounded") {
    Header h = valid_header(MsgType::Error);
    h.payload_len = kMaxErrorTextBytes + 1;
    CHECK(decode_of(h) == WireError::BadLength);
  }
  SECTION("rendezvous of a Send carries exactly one descriptor") {
    Header h = valid_header(MsgType::RendezvousReq);
    h.payload_len = kRemoteBufferBytes + 1;
    CHECK(decode_of(h) == WireError::BadLength);
    h.payload_len = kRemoteBufferBytes - 1;
    CHECK(decode_of(h) == WireError::BadLength);
  }
  SECTION("call with a response buffer needs room for the descriptor") {
    Header h = valid_header(MsgType::Call);
    h.flags = kFlagRespBuffer;
    h.payload_len = kRemoteBufferBytes - 1;
    CHECK(decode_of(h) == WireError::BadLength);
    h.payload_len = kRemoteBufferBytes;
    CHECK(decode_of(h) == WireError::None);
  }
  SECTION("data capped by the channel's max and the absolute max") {
    Header h = valid_header(MsgType::Send);
    h.payload_len = kMax;
    CHECK(decode_of(h) == WireError::None);
    h.payload_len = kMax + 1;
    CHECK(decode_of(h) == WireError::BadLength);
    h.payload_len = 0xFFFFFFFFu;
    CHECK(validate_header(h, 0xFFFFFFFFu) == WireError::BadLength);
    h.payload_len = kMaxPayloadBytes;
    CHECK(validate_header(h, 0xFFFFFFFFu) == WireError::None);
  }
}

TEST_CASE("aux is reserved except where the type uses it", "[wire]") {
  for (std::uint8_t t = 1; t <= kMaxMsgType; ++t) {
    const auto type = static_cast<MsgType>(t);
    // aux has rules: below (RailKeys: wire_rail_keys_test.cpp)
    if (type == MsgType::RendezvousReq || type == MsgType::Response || type == MsgType::RailKeys) continue;
    Header h = valid_header(type);
    h.aux = 1;
    INFO(to_string(type));
    const bool uses_aux = type == MsgType::ReadDone || type == MsgType::WriteDone || type == MsgType::Call ||
                          type == MsgType::OpenAck;  // a redirect's engine and port
    CHECK(decode_of(h) == (uses_aux ? WireError::None : WireError::ReservedNonZero));
  }
}

TEST_CASE("rendezvous: aux names Send or Call; only a Call adds a response buffer", "[wire]") {
  Header h = valid_header(MsgType::RendezvousReq);
  CHECK(decode_of(h) == WireError::None);
  h.aux = 0;
  CHECK(decode_of(h) == WireError::BadField);
  h.aux = static_cast<std::uint8_t>(MsgType::Response);
  CHECK(decode_of(h) == WireError::BadField);
  h.aux = static_cast<std::uint8_t>(MsgType::Send);
  h.flags = kFlagRespBuffer;
  h.payload_len = 2 * kRemoteBufferBytes;
  CHECK(decode_of(h) == WireError::BadFlags);
  h.aux = static_cast<std::uint8_t>(MsgType::Call);
  CHECK(decode_of(h) == WireError::None);
  h.payload_len = kRemoteBufferBytes;  // flag says two descriptors
  CHECK(decode_of(h) == WireError::BadLength);
  h.flags = 0;
  CHECK(decode_of(h) == WireError::None);
  h.payload_len = 2 * kRemoteBufferBytes;  // two without the flag
  CHECK(decode_of(h) == WireError::BadLength);
}

TEST_CASE("a call's timeout rides in aux, at most an hour; a rendezvous Send has none", "[wire]") {
  Header h = valid_header(MsgType::Call);
  set_call_timeout_ms(h, kMaxCallTimeoutMs);
  CHECK(decode_of(h) == WireError::None);
  CHECK(call_timeout_ms(h) == kMaxCallTimeoutMs);
  h.aux = kMaxCallTimeoutMs + 1;
  CHECK(decode_of(h) == WireError::BadField);

  Header r = valid_header(MsgType::RendezvousReq);
  r.aux = static_cast<std::uint8_t>(MsgType::Call);
  set_call_timeout_ms(r, 250);
  CHECK(decode_of(r) == WireError::None);
  CHECK(call_timeout_ms(r) == 250);
  CHECK(rendezvous_kind(r) == MsgType::Call);
  set_call_timeout_ms(r, kMaxCallTimeoutMs + 1);
  CHECK(decode_of(r) == WireError::BadField);
  r.aux = static_cast<std::uint8_t>(MsgType::Send) | (1u << 8);
  CHECK(decode_of(r) == WireError::ReservedNonZero);
}

TEST_CASE("response: aux only with ResponseTooLarge (the length needed)", "[wire]") {
  Header h = valid_header(MsgType::Response);
  h.aux = 70000;
  CHECK(decode_of(h) == WireError::ReservedNonZero);
  h.status = Status::ResponseTooLarge;
  h.payload_len = 0;
  CHECK(decode_of(h) == WireError::None);
}

TEST_CASE("endpoint ids and tokens required by each type", "[wire]") {
  SECTION("channel-level messages carry no endpoint") {
    for (MsgType t : {MsgType::Hello, MsgType::HelloAck, MsgType::Heartbeat, MsgType::Resync, MsgType::Goodbye}) {
      Header h = valid_header(t);
      h.dst_ep = 5;
      INFO(to_string(t));
      CHECK(decode_of(h) == WireError::MissingEndpoint);
    }
  }
  SECTION("missing source") {
    for (MsgType t : {MsgType::Open, MsgType::Send, MsgType::Call, MsgType::RendezvousReq}) {
      Header h = valid_header(t);
      h.src_ep = 0;
      INFO(to_string(t));
      CHECK(decode_of(h) == WireError::MissingEndpoint);
    }
    Header ack = valid_header(MsgType::OpenAck);
    ack.src_ep = 0;  // Ok ack must name the new endpoint
    CHECK(decode_of(ack) == WireError::MissingEndpoint);
  }
  SECTION("missing destination") {
    for (MsgType t : {MsgType::OpenAck, MsgType::Close, MsgType::Send, MsgType::Call, MsgType::Response,
                      MsgType::RendezvousReq, MsgType::WriteDone}) {
      Header h = valid_header(t);
      h.dst_ep = 0;
      INFO(to_string(t));
      CHECK(decode_of(h) == WireError::MissingEndpoint);
    }
  }
  SECTION("missing token") {
    for (MsgType t : {MsgType::Open, MsgType::OpenAck, MsgType::Call, MsgType::Response, MsgType::RendezvousReq,
                      MsgType::ReadDone, MsgType::WriteDone}) {
      Header h = valid_header(t);
      h.token = 0;
      INFO(to_string(t));
      CHECK(decode_of(h) == WireError::MissingToken);
    }
  }
}

TEST_CASE("remote buffer descriptor round trip and rejections", "[wire]") {
  const RemoteBuffer rb{0x00007F0012345000ull, 0xA5A5A5A5u, 65536};
  std::array<std::byte, kRemoteBufferBytes> b{};
  encode_remote_buffer(rb, b);
  RemoteBuffer back;
  REQUIRE(decode_remote_buffer(b, back) == WireError::None);
  CHECK(back == rb);
  CHECK(decode_remote_buffer(std::span<const std::byte>(b.data(), kRemoteBufferBytes - 1), back) ==
        WireError::Truncated);
  encode_remote_buffer(RemoteBuffer{0x1000, 1, 0}, b);
  CHECK(decode_remote_buffer(b, back) == WireError::BadField);
  encode_remote_buffer(RemoteBuffer{0xFFFFFFFFFFFFF000ull, 1, 0x2000}, b);
  CHECK(decode_remote_buffer(b, back) == WireError::BadField);
}
