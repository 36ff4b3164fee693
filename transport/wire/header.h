// The fixed header in front of every message between daemons. Encoded
// explicitly, little-endian, field by field: the in-memory Header below is a
// plain host struct and is never memcpy'd onto the wire.
//
//   off size field
//     0    1 magic_version  high nibble 0xF = ferry, low nibble = protocol version
//     1    1 type           MsgType
//     2    1 flags          kFlag*; unknown bits rejected
//     3    1 status         ferry::Status (responses/acks/errors only, else 0)
//     4    4 payload_len    bytes after the header
//     8    4 src_ep         sender's endpoint id (0 = channel-level)
//    12    4 dst_ep         receiver's endpoint id (0 = channel-level)
//    16    8 seq            per-endpoint operation number (Send/Call/RendezvousReq: Busy refusal order)
//    24    4 lane_seq       data lanes: this message's number on its lane (1, 2, ...; wraps), 0 on
//                           Credit; duplicates are dropped and gaps detected by it (channel_rebuild.cpp)
//    28    4 ack            data lanes: cumulative, the last lane_seq received in order;
//                           bootstrap: Hello = our listen port, Heartbeat answer = 1
//    32    8 token          request/correlation id (Call/Response/Open/...)
//    40    4 credit         piggybacked receive-credit grant (messages)
//    44    4 aux            type-specific (ReadDone/WriteDone: bytes moved), else 0
//    48      total
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ferry/status.h"
#include "transport/wire/msg_type.h"
#include "transport/wire/wire_error.h"

namespace ferry::wire {

inline constexpr std::uint8_t kMagicNibble = 0xF0;
inline constexpr std::uint8_t kProtocolVersion = 1;
inline constexpr std::uint8_t kMagicVersion = kMagicNibble | kProtocolVersion;

inline constexpr std::size_t kHeaderBytes = 48;
// Absolute ceiling on a payload; a channel negotiates a lower one.
inline constexpr std::uint32_t kMaxPayloadBytes = 16u << 20;
inline constexpr std::uint32_t kMaxServiceNameBytes = 64;
inline constexpr std::uint32_t kMaxErrorTextBytes = 256;

// Byte offsets of each field on the wire.
inline constexpr std::size_t kOffMagicVersion = 0;
inline constexpr std::size_t kOffType = 1;
inline constexpr std::size_t kOffFlags = 2;
inline constexpr std::size_t kOffStatus = 3;
inline constexpr std::size_t kOffPayloadLen = 4;
inline constexpr std::size_t kOffSrcEp = 8;
inline constexpr std::size_t kOffDstEp = 12;
inline constexpr std::size_t kOffSeq = 16;
inline constexpr std::size_t kOffLaneSeq = 24;
inline constexpr std::size_t kOffAck = 28;
inline constexpr std::size_t kOffToken = 32;
inline constexpr std::size_t kOffCredit = 40;
inline constexpr std::size_t kOffAux = 44;

// The same layout as a byte-only struct, so the compiler checks the table
// above: no padding is possible and every offset is asserted.
struct HeaderLayout {
  std::uint8_t magic_version;
  std::uint8_t type;
  std::uint8_t flags;
  std::uint8_t status;
  std::uint8_t payload_len[4];
  std::uint8_t src_ep[4];
  std::uint8_t dst_ep[4];
  std::uint8_t seq[8];
  std::uint8_t lane_seq[4];
  std::uint8_t ack[4];
  std::uint8_t token[8];
  std::uint8_t credit[4];
  std::uint8_t aux[4];
};
static_assert(sizeof(HeaderLayout) == kHeaderBytes);
static_assert(offsetof(HeaderLayout, magic_version) == kOffMagicVersion);
static_assert(offsetof(HeaderLayout, type) == kOffType);
static_assert(offsetof(HeaderLayout, flags) == kOffFlags);
static_assert(offsetof(HeaderLayout, status) == kOffStatus);
static_assert(offsetof(HeaderLayout, payload_len) == kOffPayloadLen);
static_assert(offsetof(HeaderLayout, src_ep) == kOffSrcEp);
static_assert(offsetof(HeaderLayout, dst_ep) == kOffDstEp);
static_assert(offsetof(HeaderLayout, seq) == kOffSeq);
static_assert(offsetof(HeaderLayout, lane_seq) == kOffLaneSeq);
static_assert(offsetof(HeaderLayout, ack) == kOffAck);
static_assert(offsetof(HeaderLayout, token) == kOffToken);
static_assert(offsetof(HeaderLayout, credit) == kOffCredit);
static_assert(offsetof(HeaderLayout, aux) == kOffAux);
static_assert(kHeaderBytes % 8 == 0, "keeps payloads that follow a header 8-byte aligned in rx buffers");

// Decoded header, host order.
struct Header {
  MsgType type = MsgType::Heartbeat;
  std::uint8_t flags = 0;
  Status status = Status::Ok;
  std::uint32_t payload_len = 0;
  std::uint32_t src_ep = 0;
  std::uint32_t dst_ep = 0;
  std::uint64_t seq = 0;
  std::uint32_t lane_seq = 0;
  std::uint32_t ack = 0;
  std::uint64_t token = 0;
  std::uint32_t credit = 0;
  std::uint32_t aux = 0;

  friend bool operator==(const Header&, const Header&) = default;
};

// A Call's timeout: how long the serving daemon lets its server hold the
// request from its arrival, in ms (0: no limit); past it the serving daemon
// answers Timeout. It rides in aux: all of it on a Call; on a
// RendezvousReq the low byte names the message it stands for (Send|Call)
// and bits 8..31 hold a Call's timeout (a Send's are 0).
inline constexpr std::uint32_t kMaxCallTimeoutMs = 3'600'000;
static_assert(kMaxCallTimeoutMs < (1u << 24), "fits a RendezvousReq's aux above its type byte");
constexpr MsgType rendezvous_kind(const Header& h) noexcept { return static_cast<MsgType>(h.aux & 0xFF); }
constexpr std::uint32_t call_timeout_ms(const Header& h) noexcept {
  return h.type == MsgType::RendezvousReq ? h.aux >> 8 : h.type == MsgType::Call ? h.aux : 0;
}
// For a Call or a RendezvousReq whose rendezvous_kind is already set.
constexpr void set_call_timeout_ms(Header& h, std::uint32_t ms) noexcept {
  if (h.type == MsgType::RendezvousReq) {
    h.aux = (h.aux & 0xFF) | (ms << 8);
  } else if (h.type == MsgType::Call) {
    h.aux = ms;
  }
}

// Writes exactly kHeaderBytes. Encodes whatever it is given: a sender that
// builds invalid headers is caught by validate_header() in debug paths and
// by the peer's decoder always.
void encode_header(const Header& h, std::span<std::byte, kHeaderBytes> out) noexcept;

// Checks a decoded header against the per-type rules (flags, status,
// endpoints, token, aux, payload length <= min(type limit, max_payload)).
[[nodiscard]] WireError validate_header(const Header& h, std::uint32_t max_payload) noexcept;

// Decodes and validates the first kHeaderBytes of `in`. Never trusts input:
// Truncated when in.size() < kHeaderBytes, any other error for bad content.
// `out` is written only on success.
[[nodiscard]] WireError decode_header(std::span<const std::byte> in, std::uint32_t max_payload, Header& out) noexcept;

}  // namespace ferry::wire
