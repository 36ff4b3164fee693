// Deterministic payloads: a splitmix64 stream seeded by (sender, seq).
#include <cstring>

#include "tests/integration/traffic.h"

namespace ferry::itest {

namespace {

constexpr std::uint32_t kMagic = 0xF0E1D2C3;

std::uint64_t splitmix(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t seed(std::uint32_t sender, std::uint64_t seq) noexcept {
  return (std::uint64_t{sender} << 40) ^ (seq * 0x100000001B3ull);
}

std::byte stream_byte(std::uint64_t s, std::uint64_t i) noexcept {
  return static_cast<std::byte>(splitmix(s + i / 8) >> (8 * (i % 8)));
}

std::uint64_t fnv(const std::byte* p, std::size_t n) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<std::uint8_t>(p[i])) * 0x100000001b3ull;
  return h;
}

struct Header {
  std::uint32_t magic;
  std::uint32_t sender;
  std::uint64_t seq;
  std::uint32_t len;
  std::uint32_t pad;
  std::uint64_t checksum;
};
static_assert(sizeof(Header) == kHeaderBytes);

// Expected byte i of the payload (header excluded: callers skip it).
void fill_stream(std::byte* p, std::uint32_t from, std::uint32_t len, std::uint64_t s) noexcept {
  std::uint32_t i = from;
  for (; i < len && i % 8 != 0; ++i) p[i] = stream_byte(s, i);
  for (; i + 8 <= len; i += 8) {
    const std::uint64_t w = splitmix(s + i / 8);
    std::memcpy(p + i, &w, 8);
  }
  for (; i < len; ++i) p[i] = stream_byte(s, i);
}

bool check_stream(const std::byte* p, std::uint32_t from, std::uint32_t len, std::uint64_t s, std::byte key) noexcept {
  std::uint32_t i = from;
  for (; i < len && i % 8 != 0; ++i) {
    if ((p[i] ^ key) != stream_byte(s, i)) return false;
  }
  std::uint64_t k8;
  std::memset(&k8, static_cast<int>(key), 8);
  for (; i + 8 <= len; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    if ((w ^ k8) != splitmix(s + i / 8)) return false;
  }
  for (; i < len; ++i) {
    if ((p[i] ^ key) != stream_byte(s, i)) return false;
  }
  return true;
}

}  // namespace

void fill_payload(std::byte* p, std::uint32_t len, std::uint32_t sender, std::uint64_t seq) noexcept {
  const std::uint64_t s = seed(sender, seq);
  if (len < kHeaderBytes) {
    fill_stream(p, 0, len, s);
    return;
  }
  fill_stream(p, kHeaderBytes, len, s);
  Header h{kMagic, sender, seq, len, 0, fnv(p + kHeaderBytes, len - kHeaderBytes)};
  std::memcpy(p, &h, sizeof h);
}

bool read_header(const std::byte* p, std::uint32_t len, std::uint32_t& sender, std::uint64_t& seq) noexcept {
  if (len < kHeaderBytes) return false;
  Header h;
  std::memcpy(&h, p, sizeof h);
  if (h.magic != kMagic || h.len != len || h.checksum != fnv(p + kHeaderBytes, len - kHeaderBytes)) return false;
  sender = h.sender;
  seq = h.seq;
  return true;
}

bool check_payload(const std::byte* p, std::uint32_t len, std::uint32_t sender, std::uint64_t seq) noexcept {
  if (len >= kHeaderBytes) {
    std::uint32_t hs;
    std::uint64_t hq;
    if (!read_header(p, len, hs, hq) || hs != sender || hq != seq) return false;
    return check_stream(p, kHeaderBytes, len, seed(sender, seq), std::byte{0});
  }
  return check_stream(p, 0, len, seed(sender, seq), std::byte{0});
}

bool check_xformed(const std::byte* p, std::uint32_t len, std::uint32_t sender, std::uint64_t seq) noexcept {
  if (len < kHeaderBytes) return check_stream(p, 0, len, seed(sender, seq), kXformKey);
  // Undo the transform on the header to compare it too.
  Header h;
  std::memcpy(&h, p, sizeof h);
  auto* hb = reinterpret_cast<std::byte*>(&h);
  for (std::size_t i = 0; i < sizeof h; ++i) hb[i] ^= kXformKey;
  if (h.magic != kMagic || h.sender != sender || h.seq != seq || h.len != len) return false;
  return check_stream(p, kHeaderBytes, len, seed(sender, seq), kXformKey);
}

std::uint32_t size_for(std::uint64_t seq, std::uint32_t max) noexcept {
  static constexpr std::uint32_t kSizes[] = {1u << 20, 1, 33, 4096, 100000, 17, 65536, 32, 777, 250000, 31, 2};
  if (seq == 0) return 64;
  const std::uint32_t s = kSizes[splitmix(seq) % (sizeof kSizes / sizeof kSizes[0])];
  return s < max ? s : max;
}

Status echo_checked(Client& c, EndpointId ep, std::uint32_t len, std::uint32_t sender, std::uint64_t tag,
                    std::chrono::milliseconds within) {
  Buffer req = c.alloc(len), resp = c.alloc(len);
  Status st = Status::NoMemory;
  if (req && resp) {
    fill_payload(req.data, len, sender, tag);
    const Completion r = call_once(c, ep, req, len, resp, tag, within);
    st = r.status;
    if (st == Status::Ok && (r.length != len || !check_payload(resp.data, len, sender, tag)))
      st = Status::ProtocolError;
  }
  if (req) (void)c.free(req);
  if (resp) (void)c.free(resp);
  return st;
}

}  // namespace ferry::itest
