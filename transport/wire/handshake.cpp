// Handshake and RemoteBuffer payload encode/decode.
#include "transport/wire/handshake.h"

#include <algorithm>
#include <cstring>

#include "transport/wire/endian.h"
#include "transport/wire/header.h"
#include "transport/wire/remote_buffer.h"

namespace ferry::wire {

std::size_t encode_handshake(const Handshake& hs, std::span<std::byte> out) noexcept {
  const std::size_t n = handshake_bytes(hs);
  if (out.size() < n || (hs.has_proof && !hs.has_nonce) || (hs.has_conn_nonce && !hs.has_proof)) return 0;
  if (hs.rail_count > kMaxHandshakeRails) return 0;
  std::byte* p = out.data();
  store_le16(p + 0, hs.protocol_version);
  store_le16(p + 2, static_cast<std::uint16_t>((hs.has_nonce ? kHandshakeHasNonce : 0) |
                                               (hs.has_proof ? kHandshakeHasProof : 0) |
                                               (hs.has_conn_nonce ? kHandshakeHasConnNonce : 0) |
                                               (hs.rail_count != 0 ? kHandshakeHasRails : 0)));
  store_le16(p + 4, hs.qp_count);
  store_le16(p + 6, 0);
  store_le64(p + 8, hs.daemon_epoch);
  store_le64(p + 16, hs.capabilities);
  store_le32(p + 24, hs.initial_credits);
  store_le32(p + 28, hs.max_message_bytes);
  if (hs.has_nonce) {
    for (std::size_t i = 0; i < kAuthNonceBytes; ++i) p[kHandshakeBaseBytes + i] = std::byte{hs.auth_nonce[i]};
  }
  if (hs.has_proof) {
    for (std::size_t i = 0; i < kAuthProofBytes; ++i) p[kHandshakeNonceBytes + i] = std::byte{hs.auth_proof[i]};
  }
  if (hs.has_conn_nonce) {
    for (std::size_t i = 0; i < kAuthNonceBytes; ++i) p[kHandshakeProofBytes + i] = std::byte{hs.conn_nonce[i]};
  }
  if (hs.rail_count != 0) {
    std::byte* r = p + n - kHandshakeRailsBytes;
    std::fill(r, r + kHandshakeRailsBytes, std::byte{0});
    r[0] = std::byte{hs.rail_count};
    for (std::size_t i = 0; i < hs.rail_count; ++i) std::memcpy(r + 4 + 4 * i, &hs.rail_ipv4[i], 4);
  }
  return n;
}

WireError decode_handshake(std::span<const std::byte> in, Handshake& out) noexcept {
  if (in.size() < kHandshakeBaseBytes) return WireError::BadLength;
  const std::byte* p = in.data();
  const std::uint16_t flags = load_le16(p + 2);
  const bool has_rails = (flags & kHandshakeHasRails) != 0;
  if ((flags & ~kHandshakeFlagsKnown) != 0) return WireError::BadFlags;
  const bool has_nonce = (flags & kHandshakeHasNonce) != 0;
  const bool has_proof = (flags & kHandshakeHasProof) != 0;
  const bool has_conn_nonce = (flags & kHandshakeHasConnNonce) != 0;
  if ((has_proof && !has_nonce) || (has_conn_nonce && !has_proof)) return WireError::BadFlags;
  const std::size_t want = (has_conn_nonce ? kHandshakeMaxBytes
                            : has_proof    ? kHandshakeProofBytes
                            : has_nonce    ? kHandshakeNonceBytes
                                           : kHandshakeBaseBytes) +
                           (has_rails ? kHandshakeRailsBytes : 0);
  if (in.size() != want) return WireError::BadLength;
  if (load_le16(p + 6) != 0) return WireError::ReservedNonZero;

  Handshake hs;
  hs.protocol_version = load_le16(p + 0);
  hs.qp_count = load_le16(p + 4);
  hs.daemon_epoch = load_le64(p + 8);
  hs.capabilities = load_le64(p + 16) & kCapsKnown;
  hs.initial_credits = load_le32(p + 24);
  hs.max_message_bytes = load_le32(p + 28);
  hs.has_nonce = has_nonce;
  hs.has_proof = has_proof;
  hs.has_conn_nonce = has_conn_nonce;
  if (has_nonce) {
    for (std::size_t i = 0; i < kAuthNonceBytes; ++i) {
      hs.auth_nonce[i] = std::to_integer<std::uint8_t>(p[kHandshakeBaseBytes + i]);
    }
  }
  if (has_proof) {
    for (std::size_t i = 0; i < kAuthProofBytes; ++i) {
      hs.auth_proof[i] = std::to_integer<std::uint8_t>(p[kHandshakeNonceBytes + i]);
    }
  }
  if (has_conn_nonce) {
    for (std::size_t i = 0; i < kAuthNonceBytes; ++i) {
      hs.conn_nonce[i] = std::to_integer<std::uint8_t>(p[kHandshakeProofBytes + i]);
    }
  }
  if (has_rails) {
    const std::byte* r = p + want - kHandshakeRailsBytes;
    hs.rail_count = std::to_integer<std::uint8_t>(r[0]);
    if (r[1] != std::byte{0} || r[2] != std::byte{0} || r[3] != std::byte{0}) return WireError::ReservedNonZero;
    if (hs.rail_count == 0 || hs.rail_count > kMaxHandshakeRails) return WireError::BadField;
    for (std::size_t i = 0; i < kMaxHandshakeRails; ++i) {
      std::memcpy(&hs.rail_ipv4[i], r + 4 + 4 * i, 4);
      if ((i < hs.rail_count) == (hs.rail_ipv4[i] == 0)) return WireError::BadField;  // used ones set, the rest 0
    }
  }
  if (hs.protocol_version == 0) return WireError::BadVersion;
  if (hs.qp_count == 0 || hs.qp_count > kMaxQpsPerChannel) return WireError::BadField;
  if (hs.daemon_epoch == 0) return WireError::BadField;
  if (hs.initial_credits == 0 || hs.initial_credits > kMaxInitialCredits) return WireError::BadField;
  if (hs.max_message_bytes < kMinMessageBytes || hs.max_message_bytes > kMaxPayloadBytes) return WireError::BadField;
  out = hs;
  return WireError::None;
}

WireError negotiate(const Handshake& local, const Handshake& remote, Negotiated& out) noexcept {
  const std::uint16_t version = std::min(local.protocol_version, remote.protocol_version);
  if (version < kProtocolVersion) return WireError::BadVersion;
  out.protocol_version = version;
  out.qp_count = std::min(local.qp_count, remote.qp_count);
  out.capabilities = local.capabilities & remote.capabilities & kCapsKnown;
  out.max_message_bytes = std::min(local.max_message_bytes, remote.max_message_bytes);
  return WireError::None;
}

void encode_remote_buffer(const RemoteBuffer& rb, std::span<std::byte, kRemoteBufferBytes> out) noexcept {
  store_le64(out.data() + 0, rb.addr);
  store_le32(out.data() + 8, rb.rkey);
  store_le32(out.data() + 12, rb.length);
}

WireError decode_remote_buffer(std::span<const std::byte> in, RemoteBuffer& out) noexcept {
  if (in.size() < kRemoteBufferBytes) return WireError::Truncated;
  RemoteBuffer rb;
  rb.addr = load_le64(in.data() + 0);
  rb.rkey = load_le32(in.data() + 8);
  rb.length = load_le32(in.data() + 12);
  if (rb.length == 0) return WireError::BadField;
  if (rb.addr + rb.length < rb.addr) return WireError::BadField;  // wraps the address space
  out = rb;
  return WireError::None;
}

}  // namespace ferry::wire
