// SHA-256 per FIPS 180-4 section 6.2, HMAC per RFC 2104.
#include "transport/wire/hmac_sha256.h"

#include <algorithm>

namespace ferry::wire {
namespace {

constexpr std::array<std::uint32_t, 64> kK = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

constexpr std::uint32_t rotr(std::uint32_t x, int n) noexcept { return (x >> n) | (x << (32 - n)); }

constexpr std::size_t kBlockBytes = 64;

}  // namespace

Sha256::Sha256() noexcept
    : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::block(const std::uint8_t* p) noexcept {
  std::array<std::uint32_t, 64> w{};
  for (int t = 0; t < 16; ++t) {
    w[t] = std::uint32_t{p[4 * t]} << 24 | std::uint32_t{p[4 * t + 1]} << 16 | std::uint32_t{p[4 * t + 2]} << 8 |
           std::uint32_t{p[4 * t + 3]};
  }
  for (int t = 16; t < 64; ++t) {
    const std::uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const std::uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  std::uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
  for (int t = 0; t < 64; ++t) {
    const std::uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[t] + w[t];
    const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h_[0] += a;
  h_[1] += b;
  h_[2] += c;
  h_[3] += d;
  h_[4] += e;
  h_[5] += f;
  h_[6] += g;
  h_[7] += h;
}

void Sha256::update(std::span<const std::uint8_t> data) noexcept {
  total_bytes_ += data.size();
  std::size_t i = 0;
  while (i < data.size()) {
    if (buf_len_ == 0 && data.size() - i >= kBlockBytes) {
      block(data.data() + i);
      i += kBlockBytes;
      continue;
    }
    const std::size_t n = std::min(kBlockBytes - buf_len_, data.size() - i);
    for (std::size_t j = 0; j < n; ++j) buf_[buf_len_ + j] = data[i + j];
    buf_len_ += n;
    i += n;
    if (buf_len_ == kBlockBytes) {
      block(buf_.data());
      buf_len_ = 0;
    }
  }
}

Sha256Digest Sha256::final() noexcept {
  const std::uint64_t bits = total_bytes_ * 8;
  // Padding: 0x80, zeros up to 56 mod 64, then the message length in bits (big endian).
  const std::uint8_t one = 0x80;
  update({&one, 1});
  const std::uint8_t zero = 0;
  while (buf_len_ != 56) update({&zero, 1});
  std::array<std::uint8_t, 8> len{};
  for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(bits >> (56 - 8 * i));
  update(len);
  Sha256Digest out{};
  for (int i = 0; i < 8; ++i) {
    out[4 * i] = static_cast<std::uint8_t>(h_[i] >> 24);
    out[4 * i + 1] = static_cast<std::uint8_t>(h_[i] >> 16);
    out[4 * i + 2] = static_cast<std::uint8_t>(h_[i] >> 8);
    out[4 * i + 3] = static_cast<std::uint8_t>(h_[i]);
  }
  return out;
}

Sha256Digest sha256(std::span<const std::uint8_t> data) noexcept {
  Sha256 s;
  s.update(data);
  return s.final();
}

Sha256Digest hmac_sha256(std::span<const std::uint8_t> key,
                         std::span<const std::span<const std::uint8_t>> parts) noexcept {
  // Keys longer than a block are hashed first (RFC 2104 section 2).
  std::array<std::uint8_t, kBlockBytes> k{};
  if (key.size() > kBlockBytes) {
    const Sha256Digest d = sha256(key);
    for (std::size_t i = 0; i < d.size(); ++i) k[i] = d[i];
  } else {
    for (std::size_t i = 0; i < key.size(); ++i) k[i] = key[i];
  }
  std::array<std::uint8_t, kBlockBytes> pad{};
  for (std::size_t i = 0; i < kBlockBytes; ++i) pad[i] = k[i] ^ 0x36;
  Sha256 inner;
  inner.update(pad);
  for (const auto& part : parts) inner.update(part);
  const Sha256Digest inner_digest = inner.final();
  for (std::size_t i = 0; i < kBlockBytes; ++i) pad[i] = k[i] ^ 0x5c;
  Sha256 outer;
  outer.update(pad);
  outer.update(inner_digest);
  // Key material does not outlive the call on the stack (best effort: the
  // volatile stores keep the compiler from dropping them as dead).
  volatile std::uint8_t* wipe_k = k.data();
  volatile std::uint8_t* wipe_pad = pad.data();
  for (std::size_t i = 0; i < kBlockBytes; ++i) {
    wipe_k[i] = 0;
    wipe_pad[i] = 0;
  }
  return outer.final();
}

Sha256Digest hmac_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> msg) noexcept {
  const std::span<const std::uint8_t> one[] = {msg};
  return hmac_sha256(key, one);
}

bool constant_time_equal(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) noexcept {
  if (a.size() != b.size()) return false;  // sizes are public (fixed MAC length)
  std::uint8_t diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<std::uint8_t>(a[i] ^ b[i]);
  // Read through volatile so the loop is not turned into an early-exit compare.
  volatile std::uint8_t result = diff;
  return result == 0;
}

}  // namespace ferry::wire
