// Shared-secret authentication of two daemons at channel bootstrap.
//
// Challenge-response, each side proving knowledge of the secret over both
// sides' fresh nonces:
//   initiator -> acceptor  Hello     (nonce Ni)
//   acceptor  -> initiator HelloAck  (nonce Na, proof Pa = MAC(Acceptor))
//   initiator -> acceptor  lane Hellos (nonce Ni, proof Pi = MAC(Initiator))
// MAC(role) = HMAC-SHA256(secret, label(role) || Ni || Na || le64 Ei || le64 Ea)
// with Ei/Ea the daemon epochs. The role label keeps one side's proof from
// being reflected back as the other's; the nonces make every proof fresh, so
// a recorded one is useless for a later channel; the epochs tie it to the two
// daemon instances. It authenticates the bootstrap only: traffic is neither
// encrypted nor MACed, so it keeps out daemons without the secret, not an
// attacker who can rewrite packets on the path.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "transport/wire/handshake.h"

namespace ferry::wire {

enum class AuthRole : std::uint8_t { Initiator, Acceptor };

constexpr std::string_view to_string(AuthRole r) noexcept {
  switch (r) {
    case AuthRole::Initiator: return "Initiator";
    case AuthRole::Acceptor: return "Acceptor";
  }
  return "Unknown";
}

// What both proofs are computed over.
struct AuthTranscript {
  AuthNonce initiator_nonce{};
  AuthNonce acceptor_nonce{};
  std::uint64_t initiator_epoch = 0;
  std::uint64_t acceptor_epoch = 0;
};

// Shortest secret a daemon accepts (bytes): a guessable secret would make
// the proofs worthless.
inline constexpr std::size_t kMinAuthSecretBytes = 16;

AuthProof make_auth_proof(std::span<const std::uint8_t> secret, AuthRole role, const AuthTranscript& t) noexcept;

// True when `proof` is make_auth_proof(secret, role, t); constant-time compare.
bool verify_auth_proof(std::span<const std::uint8_t> secret, AuthRole role, const AuthTranscript& t,
                       const AuthProof& proof) noexcept;

}  // namespace ferry::wire
