// Payload of Hello / HelloAck on the bootstrap connection.
//
//   off size field
//     0    2 protocol_version  highest version the sender speaks (>= 1)
//     2    2 flags             kHandshakeHasNonce, kHandshakeHasProof; other bits must be 0
//     4    2 qp_count          k data-path QPs / TCP connections (1..kMaxQpsPerChannel)
//     6    2 reserved          must be 0
//     8    8 daemon_epoch      changes at every daemon start; never 0
//    16    8 capabilities      kCap* bits; unknown bits are dropped, not rejected
//    24    4 initial_credits   receives the sender has posted for the peer (1..kMaxInitialCredits)
//    28    4 max_message_bytes largest payload the sender accepts (kMinMessageBytes..kMaxPayloadBytes)
//    32   16 auth_nonce        only when kHandshakeHasNonce (payload is then 48 bytes)
//    48   32 auth_proof        only when kHandshakeHasProof, which needs the nonce (80 bytes)
//    80   16 conn_nonce        only when kHandshakeHasConnNonce, which needs the proof (96 bytes):
//                              a lane Hello's nonce for this connection (daemon/peer/hello_proof.h)
//   end   20 rails             only when kHandshakeHasRails, after whichever of the above the
//                              flags give: u8 count (1..kMaxHandshakeRails), 3 bytes 0, then
//                              kMaxHandshakeRails IPv4 addresses (network order; unused ones 0):
//                              where the sender's data lanes can be reached, rail by rail
//                              (docs/rails.md). A single-rail daemon never sends it, so it
//                              talks to builds that predate it.
//
// The four lengths (32, 48, 80, 96), each + 20 with rails, are the only valid ones and must agree with
// the flags: a peer that predates a field never sends it, and one that sends
// it sets the flag, so old and new builds still talk when auth is off.
// Authentication (auth_proof.h) uses the nonce and proof; a 16-byte random
// nonce is ample for freshness (a repeat is a 2^-64 birthday event after
// 2^32 channels).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/wire/header.h"
#include "transport/wire/wire_error.h"

namespace ferry::wire {

inline constexpr std::size_t kHandshakeBaseBytes = 32;
inline constexpr std::size_t kAuthNonceBytes = 16;
inline constexpr std::size_t kAuthProofBytes = 32;  // HMAC-SHA256
inline constexpr std::size_t kHandshakeNonceBytes = kHandshakeBaseBytes + kAuthNonceBytes;
inline constexpr std::size_t kHandshakeProofBytes = kHandshakeNonceBytes + kAuthProofBytes;
inline constexpr std::size_t kHandshakeRailsBytes = 20;
inline constexpr std::size_t kMaxHandshakeRails = 4;
inline constexpr std::size_t kHandshakeMaxBytes = kHandshakeProofBytes + kAuthNonceBytes;  // largest without rails
inline constexpr std::size_t kHandshakeMaxWithRails = kHandshakeMaxBytes + kHandshakeRailsBytes;

inline constexpr std::uint16_t kHandshakeHasNonce = 1u << 0;
inline constexpr std::uint16_t kHandshakeHasProof = 1u << 1;      // only together with kHandshakeHasNonce
inline constexpr std::uint16_t kHandshakeHasConnNonce = 1u << 2;  // only together with kHandshakeHasProof
inline constexpr std::uint16_t kHandshakeHasRails = 1u << 3;      // independent of the others
inline constexpr std::uint16_t kHandshakeFlagsKnown =
    kHandshakeHasNonce | kHandshakeHasProof | kHandshakeHasConnNonce | kHandshakeHasRails;

using AuthNonce = std::array<std::uint8_t, kAuthNonceBytes>;
using AuthProof = std::array<std::uint8_t, kAuthProofBytes>;

inline constexpr std::uint16_t kMaxQpsPerChannel = 16;
inline constexpr std::uint32_t kMaxInitialCredits = 64 * 1024;
inline constexpr std::uint32_t kMinMessageBytes = 4096;

// Capabilities. A newer peer may set bits this build does not know: they are
// masked off (the feature is simply not negotiated) so mixed versions still
// talk, which a hard rejection would prevent.
inline constexpr std::uint64_t kCapTcp = 1ull << 0;             // tcp data path
inline constexpr std::uint64_t kCapRdma = 1ull << 1;            // verbs RC data path
inline constexpr std::uint64_t kCapZeroCopyWrite = 1ull << 2;   // Call response via RDMA WRITE_WITH_IMM
inline constexpr std::uint64_t kCapRendezvousRead = 1ull << 3;  // large sends via receiver RDMA READ
inline constexpr std::uint64_t kCapAuth = 1ull << 4;            // shared-secret authentication
// Receive credits granted from a shared pool (daemon/peer/receive_pool.h):
// the sender may grant beyond the receives its peer used, up to its share.
// Without it on both sides a grant returns only used receives (the peer's
// miscount check relies on that).
inline constexpr std::uint64_t kCapCreditPool = 1ull << 5;
// The sender understands RailKeys messages (transport/wire/rail_keys.h): a
// daemon with several rails sends them only to a peer that offers this, so
// an older build never sees a message type it would refuse.
inline constexpr std::uint64_t kCapRailKeys = 1ull << 6;
inline constexpr std::uint64_t kCapsKnown =
    kCapTcp | kCapRdma | kCapZeroCopyWrite | kCapRendezvousRead | kCapAuth | kCapCreditPool | kCapRailKeys;

struct Handshake {
  std::uint16_t protocol_version = kProtocolVersion;  // what this build speaks
  std::uint16_t qp_count = 1;
  std::uint64_t daemon_epoch = 0;
  std::uint64_t capabilities = 0;
  std::uint32_t initial_credits = 0;
  std::uint32_t max_message_bytes = 0;
  bool has_nonce = false;
  bool has_proof = false;       // implies has_nonce
  bool has_conn_nonce = false;  // implies has_proof
  AuthNonce auth_nonce{};
  AuthProof auth_proof{};
  AuthNonce conn_nonce{};
  // The sender's rail addresses (0: no rails block, a single-rail sender).
  std::uint8_t rail_count = 0;
  std::array<std::uint32_t, kMaxHandshakeRails> rail_ipv4{};  // network byte order, as in_addr.s_addr

  friend bool operator==(const Handshake&, const Handshake&) = default;
};

// Bytes encode_handshake() writes: one of the four forms, + the rails block.
constexpr std::size_t handshake_bytes(const Handshake& hs) noexcept {
  return (hs.has_conn_nonce ? kHandshakeMaxBytes
          : hs.has_proof    ? kHandshakeProofBytes
          : hs.has_nonce    ? kHandshakeNonceBytes
                            : kHandshakeBaseBytes) +
         (hs.rail_count != 0 ? kHandshakeRailsBytes : 0);
}

// Writes handshake_bytes(hs) bytes; returns that count, or 0 when `out` is
// too small, has_proof is set without has_nonce or has_conn_nonce without has_proof,
// or rail_count is over kMaxHandshakeRails.
std::size_t encode_handshake(const Handshake& hs, std::span<std::byte> out) noexcept;

// `in` is exactly the Hello/HelloAck payload. Errors: BadLength (size is
// none of the four forms, or disagrees with the flags), BadFlags (unknown
// bits, a proof without a nonce, a conn nonce without a proof), ReservedNonZero,
// BadField also for a rails block with 0 or too many rails or a 0 address,
// BadVersion (0), BadField (qp_count, epoch, credits, max_message out of range).
// `out` is written only on success.
[[nodiscard]] WireError decode_handshake(std::span<const std::byte> in, Handshake& out) noexcept;

// What both sides agree on after exchanging handshakes.
struct Negotiated {
  std::uint16_t protocol_version = 0;
  std::uint16_t qp_count = 0;
  std::uint64_t capabilities = 0;
  std::uint32_t max_message_bytes = 0;
};

// min() of versions, QP counts and message sizes; AND of capabilities.
// BadVersion when the common version is below what this build speaks.
[[nodiscard]] WireError negotiate(const Handshake& local, const Handshake& remote, Negotiated& out) noexcept;

}  // namespace ferry::wire
