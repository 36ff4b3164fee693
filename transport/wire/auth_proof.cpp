// The authentication proofs (see auth_proof.h for the protocol).
#include "transport/wire/auth_proof.h"

#include "transport/wire/hmac_sha256.h"

namespace ferry::wire {
namespace {

// Same-size labels: the MAC input has one layout for both roles.
constexpr std::array<std::uint8_t, 24> label(AuthRole role) noexcept {
  return mac_label<24>(role == AuthRole::Initiator ? "ferry-auth-v1 initiator" : "ferry-auth-v1 acceptor");
}

}  // namespace

AuthProof make_auth_proof(std::span<const std::uint8_t> secret, AuthRole role, const AuthTranscript& t) noexcept {
  const auto lbl = label(role);
  std::array<std::uint8_t, 16> ep{};  // both epochs, little endian like the rest of the wire
  for (int i = 0; i < 8; ++i) {
    ep[i] = static_cast<std::uint8_t>(t.initiator_epoch >> (8 * i));
    ep[8 + i] = static_cast<std::uint8_t>(t.acceptor_epoch >> (8 * i));
  }
  const std::span<const std::uint8_t> parts[] = {lbl, t.initiator_nonce, t.acceptor_nonce, ep};
  return hmac_sha256(secret, parts);
}

bool verify_auth_proof(std::span<const std::uint8_t> secret, AuthRole role, const AuthTranscript& t,
                       const AuthProof& proof) noexcept {
  const AuthProof want = make_auth_proof(secret, role, t);
  return constant_time_equal(want, proof);
}

}  // namespace ferry::wire
