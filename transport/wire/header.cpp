// Header encode/decode and the per-type validation table.
#include "transport/wire/header.h"

#include <array>

#include "transport/wire/endian.h"
#include "transport/wire/handshake.h"
#include "transport/wire/rail_keys.h"
#include "transport/wire/remote_buffer.h"

namespace ferry::wire {
namespace {

// What each message type may carry. One row per type keeps every rule in
// one table instead of scattered through the decoder.
struct TypeRule {
  std::uint32_t min_payload;
  std::uint32_t max_payload;  // further capped by the channel's max_payload
  std::uint8_t allowed_flags;
  bool any_status;  // false: status must be Ok
  bool needs_token;
  bool needs_src;
  bool needs_dst;
  bool channel_level;  // endpoints must both be 0
  bool uses_aux;
};

constexpr std::uint32_t kAny = kMaxPayloadBytes;

constexpr std::array<TypeRule, kMaxMsgType + 1> make_rules() {
  std::array<TypeRule, kMaxMsgType + 1> r{};
  auto at = [&r](MsgType t) -> TypeRule& { return r[static_cast<std::uint8_t>(t)]; };
  // A table reads better aligned.
  // clang-format off
  //                              min                max                 flags                              status token  src    dst    chan   aux
  at(MsgType::Hello) =         {kHandshakeBaseBytes, kHandshakeMaxWithRails, kFlagRetransmit,                         false, false, false, false, true,  false};
  at(MsgType::HelloAck) =      {kHandshakeBaseBytes, kHandshakeMaxWithRails, kFlagRetransmit,                         true,  false, false, false, true,  false};
  at(MsgType::Heartbeat) =     {0,                   0,                  0,                                 false, false, false, false, true,  false};
  at(MsgType::Credit) =        {0,                   0,                  0,                                 false, false, false, false, false, false};
  at(MsgType::Open) =          {1,                   kMaxServiceNameBytes, kFlagRetransmit,                 false, true,  true,  false, false, false};
  at(MsgType::OpenAck) =       {0,                   0,                  kFlagRetransmit | kFlagRedirect,   true,  true,  false, true,  false, true};
  at(MsgType::Close) =         {0,                   0,                  kFlagRetransmit,                   true,  false, false, true,  false, false};
  at(MsgType::Send) =          {0,                   kAny,               kFlagRetransmit,                   false, false, true,  true,  false, false};
  at(MsgType::Call) =          {0,                   kAny,               kFlagRetransmit | kFlagRespBuffer, false, true,  true,  true,  false, true};
  at(MsgType::Response) =      {0,                   kAny,               kFlagRetransmit,                   true,  true,  false, true,  false, true};
  at(MsgType::Error) =         {0,                   kMaxErrorTextBytes, 0,                                 true,  false, false, false, false, false};
  at(MsgType::RendezvousReq) = {kRemoteBufferBytes,  2 * kRemoteBufferBytes, kFlagRetransmit | kFlagRespBuffer, false, true, true, true, false, true};
  at(MsgType::ReadDone) =      {0,                   0,                  kFlagRetransmit,                   true,  true,  false, false, false, true};
  at(MsgType::WriteDone) =     {0,                   0,                  kFlagRetransmit,                   true,  true,  false, true,  false, true};
  at(MsgType::Resync) =        {0,                   0,                  0,                                 false, false, false, false, true,  false};
  at(MsgType::Goodbye) =       {0,                   0,                  0,                                 true,  false, false, false, true,  false};
  at(MsgType::Challenge) =     {kAuthNonceBytes,     kAuthNonceBytes,    0,                                 false, false, false, false, true,  false};
  at(MsgType::RailKeys) =      {rail_keys_bytes(1),  kRailKeysMaxBytes,  kFlagRetransmit,                   false, false, false, false, true,  true};
  // clang-format on
  return r;
}

constexpr auto kRules = make_rules();

}  // namespace

void encode_header(const Header& h, std::span<std::byte, kHeaderBytes> out) noexcept {
  std::byte* p = out.data();
  p[kOffMagicVersion] = std::byte{kMagicVersion};
  p[kOffType] = std::byte{static_cast<std::uint8_t>(h.type)};
  p[kOffFlags] = std::byte{h.flags};
  p[kOffStatus] = std::byte{static_cast<std::uint8_t>(h.status)};
  store_le32(p + kOffPayloadLen, h.payload_len);
  store_le32(p + kOffSrcEp, h.src_ep);
  store_le32(p + kOffDstEp, h.dst_ep);
  store_le64(p + kOffSeq, h.seq);
  store_le32(p + kOffLaneSeq, h.lane_seq);
  store_le32(p + kOffAck, h.ack);
  store_le64(p + kOffToken, h.token);
  store_le32(p + kOffCredit, h.credit);
  store_le32(p + kOffAux, h.aux);
}

WireError validate_header(const Header& h, std::uint32_t max_payload) noexcept {
  const auto type = static_cast<std::uint8_t>(h.type);
  if (type == 0 || type > kMaxMsgType) return WireError::BadType;
  const TypeRule& rule = kRules[type];
  if ((h.flags & ~kFlagsKnown) != 0 || (h.flags & ~rule.allowed_flags) != 0) return WireError::BadFlags;
  const auto status = static_cast<std::uint8_t>(h.status);
  if (status > kMaxStatus) return WireError::BadStatus;
  if (!rule.any_status && h.status != Status::Ok) return WireError::BadStatus;
  if (h.type == MsgType::Error && h.status == Status::Ok) return WireError::BadStatus;

  std::uint32_t min_len = rule.min_payload;
  std::uint32_t max_len = rule.max_payload;
  if (max_len > max_payload) max_len = max_payload;
  if ((h.flags & kFlagRespBuffer) != 0) min_len = kRemoteBufferBytes;
  if (h.payload_len < min_len || h.payload_len > max_len) return WireError::BadLength;

  if (!rule.uses_aux && h.aux != 0) return WireError::ReservedNonZero;
  if (rule.channel_level && (h.src_ep != 0 || h.dst_ep != 0)) return WireError::MissingEndpoint;
  if (rule.needs_src && h.src_ep == 0) return WireError::MissingEndpoint;
  if (rule.needs_dst && h.dst_ep == 0) return WireError::MissingEndpoint;
  // A successful OpenAck must name the endpoint the opener talks to from now on.
  if (h.type == MsgType::OpenAck && h.status == Status::Ok && h.src_ep == 0) return WireError::MissingEndpoint;
  if (rule.needs_token && h.token == 0) return WireError::MissingToken;
  if (h.type == MsgType::RendezvousReq) {
    // aux: the message it stands for. A Send has only its source buffer; a
    // Call may add its response buffer (kFlagRespBuffer), nothing else.
    // Bits 8..31: a Call's timeout (call_timeout_ms).
    const bool call = rendezvous_kind(h) == MsgType::Call;
    if (!call && rendezvous_kind(h) != MsgType::Send) return WireError::BadField;
    if (!call && call_timeout_ms(h) != 0) return WireError::ReservedNonZero;
    if (call_timeout_ms(h) > kMaxCallTimeoutMs) return WireError::BadField;
    const bool resp = (h.flags & kFlagRespBuffer) != 0;
    if (resp && !call) return WireError::BadFlags;
    if (h.payload_len != kRemoteBufferBytes * (resp ? 2u : 1u)) return WireError::BadLength;
  }
  if (h.type == MsgType::RailKeys) {
    // aux: the rail count; the payload is exactly that many keys.
    if (h.aux == 0 || h.aux > kMaxRailKeys) return WireError::BadField;
    if (h.payload_len != rail_keys_bytes(h.aux)) return WireError::BadLength;
  }
  if (h.type == MsgType::Call && h.aux > kMaxCallTimeoutMs) return WireError::BadField;
  // Response: aux is the length the caller would have needed, only with ResponseTooLarge.
  if (h.type == MsgType::Response && h.aux != 0 && h.status != Status::ResponseTooLarge)
    return WireError::ReservedNonZero;
  return WireError::None;
}

WireError decode_header(std::span<const std::byte> in, std::uint32_t max_payload, Header& out) noexcept {
  if (in.size() < kHeaderBytes) return WireError::Truncated;
  const std::byte* p = in.data();
  const auto mv = std::to_integer<std::uint8_t>(p[kOffMagicVersion]);
  if ((mv & 0xF0) != kMagicNibble) return WireError::BadMagic;
  if ((mv & 0x0F) != kProtocolVersion) return WireError::BadVersion;

  const auto type = std::to_integer<std::uint8_t>(p[kOffType]);
  if (type == 0 || type > kMaxMsgType) return WireError::BadType;
  const auto status = std::to_integer<std::uint8_t>(p[kOffStatus]);
  if (status > kMaxStatus) return WireError::BadStatus;

  Header h;
  h.type = static_cast<MsgType>(type);
  h.flags = std::to_integer<std::uint8_t>(p[kOffFlags]);
  h.status = static_cast<Status>(status);
  h.payload_len = load_le32(p + kOffPayloadLen);
  h.src_ep = load_le32(p + kOffSrcEp);
  h.dst_ep = load_le32(p + kOffDstEp);
  h.seq = load_le64(p + kOffSeq);
  h.lane_seq = load_le32(p + kOffLaneSeq);
  h.ack = load_le32(p + kOffAck);
  h.token = load_le64(p + kOffToken);
  h.credit = load_le32(p + kOffCredit);
  h.aux = load_le32(p + kOffAux);
  const WireError e = validate_header(h, max_payload);
  if (e == WireError::None) out = h;
  return e;
}

}  // namespace ferry::wire
