// What a shard refuses to let a worker do to it,
// without processes (suite 'unit'): a pull of keys that have no row answers
// their initial values and creates nothing; a table's max_rows refuses a
// push or assign that would create rows past it, whole; NaN and infinite
// gradients and values are refused unless allowed; a table's access list
// refuses the callers it does not name; usage() counts rows and bytes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ferry/ps/shard.h"
#include "tests/ps/made.h"

using namespace ferry;
using namespace ferry::ps;
using namespace ferry::ps::test;

namespace {

TableSpec embedding(TableId id, std::uint32_t dim, std::uint64_t rows) {
  TableSpec t;
  t.id = id;
  t.name = "emb" + std::to_string(id);
  t.dim = dim;
  t.rows = rows;
  t.optimizer.lr = 0.5f;
  t.init.kind = InitKind::Uniform;
  t.init.scale = 0.5f;
  t.init.seed = 3;
  return t;
}

std::vector<std::byte> message(Op op, const TableSpec& t, const std::vector<Key>& keys, const std::vector<float>& v,
                               std::uint32_t count = 0) {
  Header h;
  h.op = static_cast<std::uint8_t>(op);
  h.table = t.id;
  h.dim = t.dim;
  h.count = t.kind == TableKind::Embedding ? static_cast<std::uint32_t>(keys.size()) : count;
  std::vector<std::byte> m(sizeof h + 8 * keys.size() + 4 * v.size());
  std::memcpy(m.data(), &h, sizeof h);
  std::memcpy(m.data() + sizeof h, keys.data(), 8 * keys.size());
  std::memcpy(m.data() + sizeof h + 8 * keys.size(), v.data(), 4 * v.size());
  return m;
}

std::vector<std::byte> ask(Shard& s, const std::vector<std::byte>& req, std::uint32_t caller = kUnknownCaller) {
  std::vector<std::byte> resp(1 << 20);
  resp.resize(s.handle(req, resp, caller));
  return resp;
}

PsStatus refusal(const std::vector<std::byte>& resp) {
  if (resp.size() != kErrorBytes) return PsStatus::Ok;
  ErrorRecord e;
  std::memcpy(&e, resp.data(), kErrorBytes);
  return static_cast<PsStatus>(e.status);
}

std::vector<float> floats(const std::vector<std::byte>& b) {
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), 4 * f.size());
  return f;
}

TableUsage usage_of(const Shard& s, TableId id) {
  for (const TableUsage& u : s.usage())
    if (u.id == id) return u;
  FAIL("no usage for table " << id);
  return {};
}

}  // namespace

TEST_CASE("shard: a pull of keys without rows answers their initial values and creates nothing") {
  const TableSpec t = embedding(0, 16, 0);  // any 64-bit key
  const auto s_made = made_shard(ShardSpec{0, 1, {t}, 4096});
  Shard& s = *s_made;
  const TableUsage empty = usage_of(s, 0);
  std::vector<Key> keys(4096);
  for (int round = 0; round < 50; ++round) {  // 204,800 keys never seen before
    for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = mix64(round * 4096 + i + 1);
    const auto rows = floats(ask(s, message(Op::Pull, t, keys, {})));
    REQUIRE(rows.size() == keys.size() * 16);
    for (std::size_t i = 0; i < keys.size(); i += 97)
      for (std::uint32_t j = 0; j < 16; ++j) CHECK(rows[i * 16 + j] == initial_value(t, keys[i], j));
  }
  CHECK(s.find(0, keys[0]) == nullptr);
  CHECK(usage_of(s, 0).rows == 0);
  CHECK(usage_of(s, 0).bytes == empty.bytes);  // not one byte more
  // A push creates its rows (and a pull then reads them).
  REQUIRE(ask(s, message(Op::Push, t, {keys[0], keys[1]}, std::vector<float>(32, 1.0f))).size() == kAckBytes);
  CHECK(usage_of(s, 0).rows == 2);
  CHECK(s.find(0, keys[0])[0] == std::fma(-0.5f, 1.0f, initial_value(t, keys[0], 0)));
}

TEST_CASE("shard: max_rows refuses a write that would create rows past it, whole") {
  TableSpec t = embedding(0, 2, 0);
  t.max_rows = 10;
  const auto s_made = made_shard(ShardSpec{0, 1, {t}, 64});
  Shard& s = *s_made;
  std::vector<Key> first{1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(ask(s, message(Op::Push, t, first, std::vector<float>(16, 1.0f))).size() == kAckBytes);
  // Three new keys: 11 rows. Refused; not one of them created, no row changed.
  const std::vector<float> before(s.find(0, 1), s.find(0, 1) + 2);
  CHECK(refusal(ask(s, message(Op::Push, t, {1, 100, 101, 102}, std::vector<float>(8, 1.0f)))) == PsStatus::TableFull);
  CHECK(refusal(ask(s, message(Op::Assign, t, {100, 101, 102}, std::vector<float>(6, 1.0f)))) == PsStatus::TableFull);
  CHECK(s.find(0, 100) == nullptr);
  CHECK(std::vector<float>(s.find(0, 1), s.find(0, 1) + 2) == before);
  CHECK(usage_of(s, 0).rows == 8);
  CHECK(s.counters().table_full == 2);
  // Duplicates are counted once: two new keys named five times fit exactly.
  REQUIRE(ask(s, message(Op::Push, t, {100, 101, 100, 101, 100}, std::vector<float>(10, 1.0f))).size() == kAckBytes);
  CHECK(usage_of(s, 0).rows == 10);
  // Full: rows that exist take writes, pulls of any key still answer.
  CHECK(ask(s, message(Op::Push, t, first, std::vector<float>(16, 1.0f))).size() == kAckBytes);
  CHECK(refusal(ask(s, message(Op::Push, t, {999}, std::vector<float>(2, 1.0f)))) == PsStatus::TableFull);
  CHECK(floats(ask(s, message(Op::Pull, t, {999}, {})))[0] == initial_value(t, 999, 0));
  // A dense table has no max_rows; an embedding one past 2^32 - 2 is refused.
  TableSpec d;
  d.kind = TableKind::Dense;
  d.rows = 10;
  d.max_rows = 5;
  const Error bad = check_table(d);
  CHECK(bad.status() == Status::BadRequest);
  CHECK(bad.message() == "table 0: max_rows is for embedding tables");
}

TEST_CASE("shard: NaN and infinite gradients and values are refused unless allowed") {
  const TableSpec t = embedding(0, 4, 100);
  TableSpec dt;
  dt.id = 1;
  dt.kind = TableKind::Dense;
  dt.rows = 8;
  dt.optimizer.lr = 0.5f;
  const auto s_made = made_shard(ShardSpec{0, 1, {t, dt}, 64});
  Shard& s = *s_made;
  REQUIRE(ask(s, message(Op::Push, t, {3}, std::vector<float>(4, 1.0f))).size() == kAckBytes);
  const std::vector<float> before(s.find(0, 3), s.find(0, 3) + 4);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::signaling_NaN()}) {
    std::vector<float> g(8, 1.0f);
    g[6] = bad;  // the second key's
    CHECK(refusal(ask(s, message(Op::Push, t, {3, 4}, g))) == PsStatus::NonFinite);
    CHECK(refusal(ask(s, message(Op::Assign, t, {3, 4}, g))) == PsStatus::NonFinite);
    CHECK(refusal(ask(s, message(Op::Push, dt, {}, g, 8))) == PsStatus::NonFinite);
    CHECK(refusal(ask(s, message(Op::Assign, dt, {}, g, 8))) == PsStatus::NonFinite);
  }
  CHECK(std::vector<float>(s.find(0, 3), s.find(0, 3) + 4) == before);
  CHECK(s.find(0, 4) == nullptr);
  for (std::uint32_t e = 0; e < 8; ++e) CHECK(std::isfinite(*s.find(1, e)));
  CHECK(s.counters().non_finite == 16);
  CHECK(s.counters().rejected == 16);
  // The largest finite values pass.
  CHECK(ask(s, message(Op::Assign, t, {5}, std::vector<float>(4, std::numeric_limits<float>::max()))).size() ==
        kAckBytes);

  ShardSpec lax{0, 1, {t}, 64};
  lax.allow_non_finite = true;
  const auto allowing_made = made_shard(lax);
  Shard& allowing = *allowing_made;
  CHECK(ask(allowing, message(Op::Assign, t, {3}, std::vector<float>(4, std::numeric_limits<float>::infinity())))
            .size() == kAckBytes);
  CHECK(std::isinf(allowing.find(0, 3)[0]));
}

TEST_CASE("shard: a table's access list refuses the callers it does not name") {
  TableSpec open = embedding(0, 1, 100);
  TableSpec locked = embedding(1, 1, 100);
  locked.access.push = {1000, kRemoteCaller};
  locked.access.assign = {1000};
  TableSpec read_guarded = embedding(2, 1, 100);
  read_guarded.access.pull = {0};
  const auto s_made = made_shard(ShardSpec{0, 1, {open, locked, read_guarded}, 64});
  Shard& s = *s_made;
  const std::vector<float> one{1.0f};
  for (const std::uint32_t who : {0u, 1000u, 2000u, kRemoteCaller, kUnknownCaller})
    CHECK(ask(s, message(Op::Push, open, {1}, one), who).size() == kAckBytes);
  CHECK(ask(s, message(Op::Push, locked, {1}, one), 1000).size() == kAckBytes);
  CHECK(ask(s, message(Op::Push, locked, {1}, one), kRemoteCaller).size() == kAckBytes);
  CHECK(refusal(ask(s, message(Op::Push, locked, {1}, one), 2000)) == PsStatus::Forbidden);
  CHECK(refusal(ask(s, message(Op::Push, locked, {1}, one), 0)) == PsStatus::Forbidden);  // root is not special
  CHECK(refusal(ask(s, message(Op::Push, locked, {2}, one), kUnknownCaller)) == PsStatus::Forbidden);
  CHECK(refusal(ask(s, message(Op::Assign, locked, {2}, one), kRemoteCaller)) == PsStatus::Forbidden);
  CHECK(ask(s, message(Op::Assign, locked, {2}, one), 1000).size() == kAckBytes);
  CHECK(ask(s, message(Op::Pull, locked, {1}, {}), 2000).size() == 4);  // pull: no list, anyone
  CHECK(refusal(ask(s, message(Op::Pull, read_guarded, {1}, {}), 1000)) == PsStatus::Forbidden);
  CHECK(ask(s, message(Op::Pull, read_guarded, {1}, {}), 0).size() == 4);
  CHECK(s.counters().forbidden == 5);
  // Refused writes changed nothing: key 1 of `locked` took two pushes of 1.0 (1000, remote).
  CHECK(*s.find(1, 1) == std::fma(-0.5f, 1.0f, std::fma(-0.5f, 1.0f, initial_value(locked, 1, 0))));
}
