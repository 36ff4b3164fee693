// libFuzzer target for the authenticated handshake: decode of Hello/HelloAck
// payloads (all three forms) and the proof verifier the acceptor and the
// initiator run on what a peer sent. Beyond "no crash, no sanitizer
// report" it checks that
//  - whatever decodes re-encodes to the same bytes and keeps its invariants
//    (a proof only with a nonce, the length matching the flags);
//  - verify_auth_proof accepts exactly the proof make_auth_proof computes
//    for that secret, role and transcript, and rejects it with any one bit
//    flipped, under the other role, or with the nonces swapped;
//  - SHA-256 fed in two pieces equals SHA-256 of the whole.
//
// Input: byte 0 picks the role and the secret length (at least
// kMinAuthSecretBytes); the secret follows, then the handshake payload,
// whose nonce (when present) is the peer's in the transcript.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "transport/wire/auth_proof.h"
#include "transport/wire/handshake.h"
#include "transport/wire/hmac_sha256.h"

using namespace ferry::wire;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void fuzz_decode(std::span<const std::byte> in, Handshake& hs, bool& ok) {
  ok = decode_handshake(in, hs) == WireError::None;
  if (!ok) return;
  check(!hs.has_proof || hs.has_nonce);
  check(in.size() == handshake_bytes(hs));
  check(hs.protocol_version != 0 && hs.daemon_epoch != 0 && (hs.capabilities & ~kCapsKnown) == 0);
  std::array<std::byte, kHandshakeMaxWithRails> out{};
  const std::size_t n = encode_handshake(hs, out);
  check(n == in.size());
  // Unknown capability bits are dropped on decode, so compare the fields, not the bytes 16..23.
  Handshake again;
  check(decode_handshake(std::span<const std::byte>(out.data(), n), again) == WireError::None);
  check(again == hs);
  check(std::memcmp(out.data() + 24, in.data() + 24, n - 24) == 0);
}

void fuzz_proof(std::span<const std::uint8_t> secret, AuthRole role, const Handshake& peer) {
  AuthTranscript t;
  t.initiator_nonce = peer.auth_nonce;
  t.initiator_epoch = peer.daemon_epoch;
  for (std::size_t i = 0; i < kAuthNonceBytes; ++i) t.acceptor_nonce[i] = static_cast<std::uint8_t>(0x5A ^ i);
  t.acceptor_epoch = ~peer.daemon_epoch;

  // What the peer sent: accepted only when it is the real proof.
  const AuthProof real = make_auth_proof(secret, role, t);
  const bool sent_ok = verify_auth_proof(secret, role, t, peer.auth_proof);
  check(sent_ok == (std::memcmp(real.data(), peer.auth_proof.data(), kAuthProofBytes) == 0));

  check(verify_auth_proof(secret, role, t, real));
  check(make_auth_proof(secret, role, t) == real);  // deterministic
  const AuthRole other = role == AuthRole::Initiator ? AuthRole::Acceptor : AuthRole::Initiator;
  check(!verify_auth_proof(secret, other, t, real));
  AuthProof flipped = real;
  const std::size_t bit = peer.daemon_epoch % (kAuthProofBytes * 8);
  flipped[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
  check(!verify_auth_proof(secret, role, t, flipped));
  if (t.initiator_nonce != t.acceptor_nonce) {
    AuthTranscript swapped = t;
    std::swap(swapped.initiator_nonce, swapped.acceptor_nonce);
    check(!verify_auth_proof(secret, role, swapped, real));
  }
}

void fuzz_sha(std::span<const std::uint8_t> in) {
  const std::size_t cut = in.empty() ? 0 : in[0] % (in.size() + 1);
  Sha256 s;
  s.update(in.first(cut));
  s.update(in.subspan(cut));
  check(s.final() == sha256(in));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  fuzz_sha(in);
  if (size < 1) return 0;
  const AuthRole role = (data[0] & 0x80) != 0 ? AuthRole::Initiator : AuthRole::Acceptor;
  const std::size_t secret_len = kMinAuthSecretBytes + (data[0] & 0x3F);
  if (size < 1 + secret_len) return 0;
  const auto secret = in.subspan(1, secret_len);
  const auto rest = in.subspan(1 + secret_len);
  const std::span<const std::byte> payload(reinterpret_cast<const std::byte*>(rest.data()), rest.size());

  Handshake hs;
  bool ok = false;
  fuzz_decode(payload, hs, ok);
  // Each fixed-size prefix too, so all four forms get exercised.
  for (std::size_t n : {kHandshakeBaseBytes, kHandshakeNonceBytes, kHandshakeProofBytes, kHandshakeMaxBytes}) {
    if (payload.size() > n) {
      Handshake prefix;
      bool prefix_ok = false;
      fuzz_decode(payload.first(n), prefix, prefix_ok);
    }
  }
  if (ok && hs.has_nonce) fuzz_proof(secret, role, hs);
  return 0;
}
