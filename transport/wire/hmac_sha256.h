// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the peer
// authentication proofs (auth_proof.h). Written here because the project
// takes no crypto library; small inputs only (handshake transcripts), so
// clarity wins over speed. Not for bulk data.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace ferry::wire {

inline constexpr std::size_t kSha256Bytes = 32;
using Sha256Digest = std::array<std::uint8_t, kSha256Bytes>;

// Incremental SHA-256: update() any number of times, then final() once.
class Sha256 {
 public:
  Sha256() noexcept;
  void update(std::span<const std::uint8_t> data) noexcept;
  Sha256Digest final() noexcept;

 private:
  void block(const std::uint8_t* p) noexcept;

  std::array<std::uint32_t, 8> h_{};
  std::array<std::uint8_t, 64> buf_{};
  std::size_t buf_len_ = 0;
  std::uint64_t total_bytes_ = 0;
};

Sha256Digest sha256(std::span<const std::uint8_t> data) noexcept;

// HMAC-SHA256 over the concatenation of `parts` (saves the caller a copy).
Sha256Digest hmac_sha256(std::span<const std::uint8_t> key,
                         std::span<const std::span<const std::uint8_t>> parts) noexcept;
Sha256Digest hmac_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> msg) noexcept;

// Equality whose time does not depend on where the inputs differ, so a MAC
// check leaks nothing about how much of a forged MAC was right.
bool constant_time_equal(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) noexcept;

}  // namespace ferry::wire
