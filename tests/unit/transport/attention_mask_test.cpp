// AttentionMask (transport/attention_mask.h): set/clear/test/count and the
// next() sweep across word boundaries, at the first and last bit, at the
// sizes the backends use (rdma and tcp: 1,024) and at one word.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "transport/attention_mask.h"

using ferry::transport::AttentionMask;

namespace {

template <std::uint32_t Bits>
std::vector<std::uint32_t> sweep(const AttentionMask<Bits>& m, std::uint32_t from = 0) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t s = m.next(from); s != AttentionMask<Bits>::kNone; s = m.next(s + 1)) out.push_back(s);
  return out;
}

}  // namespace

TEST_CASE("attention mask: empty") {
  AttentionMask<1024> m;
  CHECK_FALSE(m.any());
  CHECK(m.count() == 0);
  CHECK(m.next(0) == AttentionMask<1024>::kNone);
  CHECK(m.next(1023) == AttentionMask<1024>::kNone);
  CHECK(m.next(1024) == AttentionMask<1024>::kNone);  // past the end: none, no read out of bounds
  CHECK(m.next(0xFFFFFFFFu) == AttentionMask<1024>::kNone);
  for (std::uint32_t s = 0; s < 1024; ++s) REQUIRE_FALSE(m.test(s));
}

TEST_CASE("attention mask: first and last bit, and the word boundaries") {
  AttentionMask<1024> m;
  const std::vector<std::uint32_t> bits = {0, 63, 64, 127, 128, 511, 512, 960, 1022, 1023};
  for (std::uint32_t b : bits) m.set(b);
  CHECK(m.any());
  CHECK(m.count() == bits.size());
  for (std::uint32_t s = 0; s < 1024; ++s) {
    bool want = false;
    for (std::uint32_t b : bits) want = want || b == s;
    REQUIRE(m.test(s) == want);
  }
  CHECK(sweep(m) == bits);
  // next(from) at, just past and just before each set bit.
  CHECK(m.next(0) == 0);
  CHECK(m.next(1) == 63);
  CHECK(m.next(63) == 63);
  CHECK(m.next(64) == 64);
  CHECK(m.next(65) == 127);
  CHECK(m.next(129) == 511);
  CHECK(m.next(513) == 960);
  CHECK(m.next(961) == 1022);
  CHECK(m.next(1023) == 1023);
  CHECK(m.next(1024) == AttentionMask<1024>::kNone);
  CHECK(sweep(m, 600) == std::vector<std::uint32_t>{960, 1022, 1023});
}

TEST_CASE("attention mask: set and clear are idempotent and keep the count") {
  AttentionMask<1024> m;
  m.set(700);
  m.set(700);
  m.set(700);
  CHECK(m.count() == 1);
  m.clear(5);  // never set: no change
  CHECK(m.count() == 1);
  m.clear(700);
  m.clear(700);
  CHECK(m.count() == 0);
  CHECK_FALSE(m.any());
  CHECK_FALSE(m.test(700));
  CHECK(m.next(0) == AttentionMask<1024>::kNone);
}

TEST_CASE("attention mask: every bit, then clearing every other one") {
  AttentionMask<1024> m;
  for (std::uint32_t s = 0; s < 1024; ++s) m.set(s);
  CHECK(m.count() == 1024);
  CHECK(sweep(m).size() == 1024);
  for (std::uint32_t s = 0; s < 1024; s += 2) m.clear(s);
  CHECK(m.count() == 512);
  const auto odd = sweep(m);
  REQUIRE(odd.size() == 512);
  for (std::size_t i = 0; i < odd.size(); ++i) REQUIRE(odd[i] == 2 * i + 1);
  // Clearing while sweeping (what the datapath does): each bit once.
  std::uint32_t visited = 0;
  for (std::uint32_t s = m.next(0); s != AttentionMask<1024>::kNone; s = m.next(s + 1)) {
    m.clear(s);
    ++visited;
  }
  CHECK(visited == 512);
  CHECK_FALSE(m.any());
  m.set(3);
  m.reset();
  CHECK(m.count() == 0);
  CHECK_FALSE(m.test(3));
}

TEST_CASE("attention mask: one word") {
  AttentionMask<64> m;
  m.set(0);
  m.set(63);
  CHECK(m.count() == 2);
  CHECK(sweep(m) == std::vector<std::uint32_t>{0, 63});
  CHECK(m.next(1) == 63);
  CHECK(m.next(64) == AttentionMask<64>::kNone);
  m.clear(0);
  CHECK(m.next(0) == 63);
}
