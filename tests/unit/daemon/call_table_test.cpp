// Request tokens: unique, single use, and never matching a forged value.
#include <catch2/catch.hpp>

#include <set>

#include "daemon/serve/call_table.h"

using namespace ferry::daemon;

TEST_CASE("tokens are unique, nonzero and single use") {
  CallTable t(0x1234567890abcdefull, 16);
  std::set<std::uint64_t> seen;
  for (int round = 0; round < 100; ++round) {
    PendingCall c;
    c.user_data = static_cast<std::uint64_t>(round);
    std::uint64_t tok = t.insert(c);
    CHECK(tok != 0);
    CHECK(seen.insert(tok).second);  // slots are reused, tokens are not
    PendingCall* p = t.find(tok);
    REQUIRE(p != nullptr);
    CHECK(p->user_data == static_cast<std::uint64_t>(round));
    t.erase(tok);
    CHECK(t.find(tok) == nullptr);
  }
  CHECK(t.size() == 0);
}

TEST_CASE("forged and stale tokens miss") {
  CallTable t(42, 4);
  std::uint64_t a = t.insert(PendingCall{});
  std::uint64_t b = t.insert(PendingCall{});
  CHECK(t.size() == 2);
  const std::uint64_t candidates[] = {
      0, 1, ~std::uint64_t{0}, a ^ 1, a + (std::uint64_t{1} << 32), b ^ (std::uint64_t{1} << 40)};
  for (std::uint64_t forged : candidates) {
    if (forged == a || forged == b) continue;
    CHECK(t.find(forged) == nullptr);
  }
  t.erase(a);
  t.erase(a);  // double erase is harmless
  CHECK(t.size() == 1);
  CHECK(t.find(b) != nullptr);
}

TEST_CASE("sweep erases what the predicate picks") {
  CallTable t(7, 8);
  std::uint64_t toks[6];
  for (int i = 0; i < 6; ++i) {
    PendingCall c;
    c.server = static_cast<std::uint32_t>(i % 2);
    toks[i] = t.insert(c);
  }
  t.sweep([](PendingCall& c) { return c.server == 1; });
  CHECK(t.size() == 3);
  for (int i = 0; i < 6; ++i) CHECK((t.find(toks[i]) != nullptr) == (i % 2 == 0));
}
