// SHA-256 and HMAC-SHA256 through libcrypto's EVP interfaces (OpenSSL 3).
#include "transport/wire/hmac_sha256.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <sys/random.h>

#include <cstring>

namespace ferry::wire {
namespace {

// Fail closed: a digest that matches nothing (see the header).
Sha256Digest unmatchable() noexcept {
  Sha256Digest d{};
  if (::getrandom(d.data(), d.size(), 0) != static_cast<ssize_t>(d.size())) {
    // No entropy either: still never equal to a real MAC in practice, and
    // different from call to call.
    static std::uint64_t counter = 0;
    const std::uint64_t c = ++counter ^ reinterpret_cast<std::uintptr_t>(&d);
    std::memcpy(d.data(), &c, sizeof c);
    d[31] ^= 0xA5;
  }
  return d;
}

struct MacCtxFree {
  void operator()(EVP_MAC_CTX* c) const noexcept { EVP_MAC_CTX_free(c); }
};

}  // namespace

void Sha256::CtxFree::operator()(void* ctx) const noexcept { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx)); }

Sha256::Sha256() noexcept : ctx_(EVP_MD_CTX_new()) {
  failed_ = ctx_ == nullptr || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_.get()), EVP_sha256(), nullptr) != 1;
}

Sha256::~Sha256() = default;

void Sha256::update(std::span<const std::uint8_t> data) noexcept {
  if (failed_ || data.empty()) return;
  failed_ = EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_.get()), data.data(), data.size()) != 1;
}

Sha256Digest Sha256::final() noexcept {
  Sha256Digest d{};
  unsigned int len = 0;
  if (failed_ || EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_.get()), d.data(), &len) != 1 || len != d.size()) {
    failed_ = true;
    return unmatchable();
  }
  failed_ = true;  // final() once: a second call gets a digest that matches nothing
  return d;
}

Sha256Digest sha256(std::span<const std::uint8_t> data) noexcept {
  Sha256 s;
  s.update(data);
  return s.final();
}

Sha256Digest hmac_sha256(std::span<const std::uint8_t> key,
                         std::span<const std::span<const std::uint8_t>> parts) noexcept {
  // Fetched once: the HMAC implementation of the default provider.
  static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (mac == nullptr) return unmatchable();
  std::unique_ptr<EVP_MAC_CTX, MacCtxFree> ctx(EVP_MAC_CTX_new(mac));
  if (!ctx) return unmatchable();
  char digest_name[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
      OSSL_PARAM_construct_end(),
  };
  // A zero-length key is legal HMAC; libcrypto wants a non-null pointer.
  static const std::uint8_t kNoKey = 0;
  const std::uint8_t* key_ptr = key.empty() ? &kNoKey : key.data();
  if (EVP_MAC_init(ctx.get(), key_ptr, key.size(), params) != 1) return unmatchable();
  for (const auto& part : parts) {
    if (!part.empty() && EVP_MAC_update(ctx.get(), part.data(), part.size()) != 1) return unmatchable();
  }
  Sha256Digest d{};
  std::size_t len = 0;
  if (EVP_MAC_final(ctx.get(), d.data(), &len, d.size()) != 1 || len != d.size()) return unmatchable();
  return d;
}

Sha256Digest hmac_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> msg) noexcept {
  const std::span<const std::uint8_t> parts[] = {msg};
  return hmac_sha256(key, parts);
}

bool constant_time_equal(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) noexcept {
  if (a.size() != b.size()) return false;  // sizes are public (fixed-size MACs)
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace ferry::wire
