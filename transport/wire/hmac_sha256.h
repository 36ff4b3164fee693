// SHA-256 and HMAC-SHA256 for the peer authentication proofs
// (auth_proof.h), through OpenSSL's libcrypto: a maintained, audited
// implementation rather than one of our own. Small inputs only (handshake
// transcripts); never on the datapath.
//
// libcrypto fails here only when it cannot allocate. Then a digest comes
// back filled with random bytes, so a proof made or checked with it never
// matches: authentication fails closed (the channel is refused) and the
// process keeps running.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace ferry::wire {

inline constexpr std::size_t kSha256Bytes = 32;
using Sha256Digest = std::array<std::uint8_t, kSha256Bytes>;

// Incremental SHA-256: update() any number of times, then final() once.
class Sha256 {
 public:
  Sha256() noexcept;
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(std::span<const std::uint8_t> data) noexcept;
  [[nodiscard]] Sha256Digest final() noexcept;

 private:
  struct CtxFree {
    void operator()(void* ctx) const noexcept;
  };
  std::unique_ptr<void, CtxFree> ctx_;  // EVP_MD_CTX, kept opaque so callers need no OpenSSL header
  bool failed_ = false;
};

[[nodiscard]] Sha256Digest sha256(std::span<const std::uint8_t> data) noexcept;

// HMAC-SHA256 over the concatenation of `parts` (saves the caller a copy).
[[nodiscard]] Sha256Digest hmac_sha256(std::span<const std::uint8_t> key,
                                       std::span<const std::span<const std::uint8_t>> parts) noexcept;
[[nodiscard]] Sha256Digest hmac_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> msg) noexcept;

// A MAC input's domain label: `text` NUL padded to N bytes, so every proof
// of one kind has one fixed input layout whatever its label says.
template <std::size_t N>
constexpr std::array<std::uint8_t, N> mac_label(std::string_view text) noexcept {
  std::array<std::uint8_t, N> out{};
  for (std::size_t i = 0; i < text.size() && i < N; ++i) out[i] = static_cast<std::uint8_t>(text[i]);
  return out;
}

// Equality whose time does not depend on where the inputs differ, so a MAC
// check leaks nothing about how much of a forged MAC was right.
[[nodiscard]] bool constant_time_equal(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) noexcept;

}  // namespace ferry::wire
