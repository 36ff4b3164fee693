// The proofs on a data lane's handshake when auth-secret-file is set: what
// makes a recorded lane Hello (or HelloAck) useless on any other connection.
//
// The channel's bootstrap already exchanged the initiator's nonce Ni and the
// acceptor's Na (transport/wire/auth_proof.h). Each lane connection then
// adds two nonces of its own:
//   acceptor -> dialer   Challenge  (Nc: fresh for this accepted connection)
//   dialer   -> acceptor lane Hello (Ni, Nd: fresh for this connection,
//                                    proof Ph = MAC(Hello))
//   acceptor -> dialer   lane HelloAck (Na, proof Pa = MAC(HelloAck))
// MAC(dir) = HMAC-SHA256(secret, label(dir) || Ni || Na || Nc || Nd ||
//            le64 Ei || le64 Ea || le32 lane || u8 rejoin || le64 ack ||
//            u8 status)
// where lane, rejoin (kFlagRetransmit) and ack are the sender's header
// fields and status its HelloAck status (0 on a Hello). The direction label
// keeps a Hello from passing for a HelloAck; Nc binds the Hello to the
// connection the acceptor sees, Nd the HelloAck to the one the dialer sees;
// Ni, Na and the epochs bind both to the channel; rejoin and ack to the
// claim being made (join, or replace lane N having received up to ack).
//
// Pure functions: no state, no allocation (OpenSSL's HMAC underneath).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "ferry/status.h"
#include "transport/wire/handshake.h"

namespace ferry::daemon::peer {

enum class HelloDir : std::uint8_t { Hello, HelloAck };

constexpr std::string_view to_string(HelloDir d) noexcept {
  switch (d) {
    case HelloDir::Hello: return "Hello";
    case HelloDir::HelloAck: return "HelloAck";
  }
  return "Unknown";
}

// Everything one lane handshake message's proof covers.
struct LaneTranscript {
  wire::AuthNonce initiator_nonce{};  // Ni (the channel's)
  wire::AuthNonce acceptor_nonce{};   // Na (the channel's)
  wire::AuthNonce challenge{};        // Nc (the acceptor's, this connection)
  wire::AuthNonce dialer_nonce{};     // Nd (the dialer's, this connection)
  std::uint64_t initiator_epoch = 0;
  std::uint64_t acceptor_epoch = 0;
  std::uint32_t lane = 0;
  bool rejoin = false;
  std::uint64_t ack = 0;
  Status status = Status::Ok;
};

[[nodiscard]] wire::AuthProof make_lane_proof(std::span<const std::uint8_t> secret, HelloDir dir,
                                              const LaneTranscript& t) noexcept;

// True when `proof` is make_lane_proof(secret, dir, t); constant-time compare.
[[nodiscard]] bool verify_lane_proof(std::span<const std::uint8_t> secret, HelloDir dir, const LaneTranscript& t,
                                     const wire::AuthProof& proof) noexcept;

// A fresh random nonce from getrandom(); false when the kernel gave none.
[[nodiscard]] bool fresh_nonce(wire::AuthNonce& out) noexcept;

}  // namespace ferry::daemon::peer
