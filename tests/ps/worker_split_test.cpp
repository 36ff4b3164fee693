// A Worker's operations of any size (suite 'unit'): over an in-process link
// whose messages are small and whose arena is a byte budget, pulls, pushes,
// assigns and dense operations larger than a message are split into
// requests that each fit, at most max_calls in flight, waiting for memory
// rather than failing while calls are in flight, and still one ticket with
// one result; a row that can never fit is refused up front; a prepared
// push_rows sends what was written into its requests.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

#include "ferry/ps/shard.h"
#include "ferry/ps/shard_link.h"
#include "ferry/ps/worker.h"
#include "tests/ps/in_process_link.h"
#include "tests/ps/made.h"

using namespace ferry;
using namespace ferry::ps;
using namespace ferry::ps::test;

namespace {

constexpr std::size_t kMessage = 4096;

TableSpec embedding(std::uint32_t dim, OptimizerKind opt = OptimizerKind::Sgd) {
  TableSpec t;
  t.id = 0;
  t.name = "emb";
  t.kind = TableKind::Embedding;
  t.dim = dim;
  t.rows = 0;
  t.optimizer.kind = opt;
  t.optimizer.lr = 1.0f;
  t.init.kind = InitKind::Uniform;
  t.init.scale = 0.5f;
  t.init.seed = 3;
  return t;
}

struct Rig {
  explicit Rig(TableSpec t, std::size_t budget = 64 * kMessage, std::uint32_t max_calls = 256,
               std::uint32_t max_count = 0)
      : table(t) {
    s0 = made_shard(ShardSpec{0, 2, {t}, 1u << 16});
    s1 = made_shard(ShardSpec{1, 2, {t}, 1u << 16});
    auto l = std::make_unique<InProcessLink>(std::vector<Shard*>{s0.get(), s1.get()},
                                             InProcessLink::Options{kMessage, budget, true});
    link = l.get();
    WorkerOptions o{{t}};
    o.max_calls = max_calls;
    o.max_count = max_count;
    worker = made_worker(std::move(l), o);
  }
  TableSpec table;
  std::unique_ptr<Shard> s0, s1;
  InProcessLink* link = nullptr;
  std::unique_ptr<Worker> worker;
};

std::vector<Key> iota_keys(std::size_t n, Key from = 0) {
  std::vector<Key> k(n);
  for (std::size_t i = 0; i < n; ++i) k[i] = from + i;
  return k;
}

}  // namespace

TEST_CASE("split: a pull larger than a message is many requests, one ticket, rows in process memory") {
  Rig r(embedding(8));
  Worker& w = *r.worker;
  const std::vector<Key> keys = iota_keys(3000);  // 96 KB of rows, messages of 4 KB
  const auto p = w.pull(0, keys);
  REQUIRE(p);
  REQUIRE(w.wait(p.value, std::chrono::seconds(5)) == Status::Ok);
  CHECK(r.link->calls >= 3000 / 100);  // at most (4096 - 64) / (8 + 32) = 100 keys per request
  const PulledRows rows = w.rows(p.value);
  CHECK(rows.staged);
  REQUIRE(rows.keys.size() == 3000);
  for (std::size_t i = 0; i < keys.size(); i += 97)
    for (std::uint32_t j = 0; j < 8; ++j)
      CHECK(rows.rows[static_cast<std::size_t>(rows.index[i]) * 8 + j] == initial_value(r.table, keys[i], j));
  w.release(p.value);
  CHECK(w.live_ops() == 0);
  CHECK(r.link->used() == 0);  // every request and staged block given back
}

TEST_CASE("split: a pull that fits one block stays zero copy even over several requests") {
  // 200 rows x 16 B = 3.2 KB: one block; each request at most 16 keys.
  Rig r(embedding(4), 64 * kMessage, 256, 16);
  Worker& w = *r.worker;
  const auto p = w.pull(0, iota_keys(200));
  REQUIRE(w.wait(p.value, std::chrono::seconds(5)) == Status::Ok);
  CHECK(r.link->calls >= 200 / 16);
  const PulledRows rows = w.rows(p.value);
  CHECK_FALSE(rows.staged);
  CHECK(rows.block);
  for (std::size_t i = 0; i < 200; ++i)
    CHECK(rows.rows[static_cast<std::size_t>(rows.index[i]) * 4] == initial_value(r.table, i, 0));
}

TEST_CASE("split: pushes and assigns of many rows apply every row once, duplicates across requests summed") {
  Rig r(embedding(8));
  Worker& w = *r.worker;
  std::vector<Key> keys = iota_keys(2000);
  keys.push_back(5);  // a duplicate, far from its first occurrence
  std::vector<float> values(keys.size() * 8);
  for (std::size_t i = 0; i < keys.size(); ++i)
    for (std::size_t j = 0; j < 8; ++j) values[i * 8 + j] = static_cast<float>(keys[i] % 100) + 0.5f * j;
  const auto a = w.assign(0, keys, values);
  REQUIRE(a);
  REQUIRE(w.wait(a.value, std::chrono::seconds(5)) == Status::Ok);
  const auto g = w.push(0, keys, std::vector<float>(keys.size() * 8, 1.0f));
  REQUIRE(g);
  REQUIRE(w.wait(g.value, std::chrono::seconds(5)) == Status::Ok);
  const auto p = w.pull(0, keys);
  REQUIRE(w.wait(p.value, std::chrono::seconds(5)) == Status::Ok);
  const PulledRows rows = w.rows(p.value);
  for (std::size_t i = 0; i < 2000; ++i) {
    const float want = static_cast<float>(keys[i] % 100) - (keys[i] == 5 ? 2.0f : 1.0f);  // lr 1
    CHECK(rows.rows[static_cast<std::size_t>(rows.index[i]) * 8] == want);
  }
  for (Ticket t : {a.value, g.value, p.value}) w.release(t);
  CHECK(r.link->used() == 0);
}

TEST_CASE("split: at most max_calls requests in flight; a small arena makes requests wait, not fail") {
  SECTION("max_calls") {
    Rig r(embedding(8), 64 * kMessage, 3);
    const auto p = r.worker->pull(0, iota_keys(3000));
    REQUIRE(r.worker->wait(p.value, std::chrono::seconds(5)) == Status::Ok);
    CHECK(r.link->most_in_flight <= 3);
    CHECK(r.link->calls > 3);
  }
  SECTION("arena of three messages") {
    Rig r(embedding(8), 3 * kMessage + 64);
    std::vector<Key> keys = iota_keys(3000);
    const auto g = r.worker->push(0, keys, std::vector<float>(keys.size() * 8, 0.25f));
    REQUIRE(g);
    REQUIRE(r.worker->wait(g.value, std::chrono::seconds(5)) == Status::Ok);
    CHECK(r.link->refused > 0);  // it did run out, and waited
    const auto p = r.worker->pull(0, std::vector<Key>{0, 2999});
    REQUIRE(r.worker->wait(p.value, std::chrono::seconds(5)) == Status::Ok);
    const PulledRows rows = r.worker->rows(p.value);
    CHECK(rows.rows[static_cast<std::size_t>(rows.index[1]) * 8] == initial_value(r.table, 2999, 0) - 0.25f);
  }
  SECTION("an op submitted behind one that fills the arena waits for memory too") {
    // The first push's ack slots (31 requests: 124 B) and two of its requests
    // (32 + 100 x 40 B each) fill the arena to the byte: the second push
    // finds no room even for its acks, and must wait, not fail.
    Rig r(embedding(8), 124 + 2 * 4032);
    const std::vector<Key> keys = iota_keys(3000);
    const auto a = r.worker->push(0, keys, std::vector<float>(keys.size() * 8, 0.25f));
    REQUIRE(a);
    CHECK(r.link->used() == 124 + 2 * 4032);
    const auto b = r.worker->push(0, keys, std::vector<float>(keys.size() * 8, 0.25f));
    REQUIRE(b);
    REQUIRE(r.worker->wait(a.value, std::chrono::seconds(5)) == Status::Ok);
    REQUIRE(r.worker->wait(b.value, std::chrono::seconds(5)) == Status::Ok);
    const auto p = r.worker->pull(0, std::vector<Key>{0, 2999});
    REQUIRE(r.worker->wait(p.value, std::chrono::seconds(5)) == Status::Ok);
    const PulledRows rows = r.worker->rows(p.value);
    CHECK(rows.rows[static_cast<std::size_t>(rows.index[1]) * 8] == initial_value(r.table, 2999, 0) - 0.5f);
    for (const Ticket t : {a.value, b.value, p.value}) r.worker->release(t);
    CHECK(r.link->used() == 0);
  }
  SECTION("an arena smaller than one request, nothing in flight: NoMemory, nothing sent") {
    Rig r(embedding(8), 512);
    const auto g = r.worker->push(0, iota_keys(3000), std::vector<float>(3000 * 8, 1.0f));
    CHECK(g.status == Status::NoMemory);
    CHECK(r.link->calls == 0);
    CHECK(r.worker->live_ops() == 0);
  }
}

TEST_CASE("split: a row larger than any message is refused before anything is sent") {
  Rig r(embedding(2000));  // 8 KB rows, 4 KB messages
  CHECK(r.worker->pull(0, std::vector<Key>{1}).status == Status::ResponseTooLarge);
  CHECK(r.worker->push(0, std::vector<Key>{1}, std::vector<float>(2000)).status == Status::ResponseTooLarge);
  CHECK(r.link->calls == 0);
  CHECK(r.worker->live_ops() == 0);
  const auto none = r.worker->pull(0, std::vector<Key>{});
  REQUIRE(none);  // no rows: nothing to fit
  CHECK(r.worker->status(none.value) == Status::Ok);
}

TEST_CASE("split: dense tables larger than a message pull and push in slices") {
  TableSpec d;
  d.id = 0;
  d.name = "dense";
  d.kind = TableKind::Dense;
  d.dim = 1;
  d.rows = 10000;  // 40 KB
  d.optimizer.lr = 1.0f;
  d.init.kind = InitKind::Pattern;
  Rig r(d);
  Worker& w = *r.worker;
  const auto g = w.push_dense(0, std::vector<float>(10000, 3.0f));
  REQUIRE(w.wait(g.value, std::chrono::seconds(5)) == Status::Ok);
  const auto p = w.pull_dense(0);
  REQUIRE(w.wait(p.value, std::chrono::seconds(5)) == Status::Ok);
  const PulledRows rows = w.rows(p.value);
  REQUIRE(rows.rows.size() == 10000);
  for (std::size_t e = 0; e < 10000; e += 331) CHECK(rows.rows[e] == initial_value(d, e, 0) - 3.0f);
}

TEST_CASE("split: a prepared push_rows sends the gradient written into its requests") {
  Rig r(embedding(8));
  Worker& w = *r.worker;
  const std::vector<Key> keys = iota_keys(100, 7);
  const auto p = w.pull(0, keys);
  REQUIRE(w.wait(p.value, std::chrono::seconds(5)) == Status::Ok);
  const auto q = w.push_rows_prepare(p.value);
  REQUIRE(q);
  const int before = r.link->calls;
  const auto parts = w.prepared(q.value);
  REQUIRE(!parts.empty());
  std::uint32_t rows = 0;
  for (const auto& part : parts) {
    rows += part.count;
    for (std::uint32_t i = 0; i < part.count * 8; ++i) part.values[i] = 2.0f;
  }
  CHECK(rows == 100);
  CHECK(r.link->calls == before);  // nothing sent before commit
  CHECK(w.status(q.value) == Status::Busy);
  REQUIRE(w.commit(q.value) == Status::Ok);
  REQUIRE(w.wait(q.value, std::chrono::seconds(5)) == Status::Ok);
  const auto again = w.pull(0, keys);
  REQUIRE(w.wait(again.value, std::chrono::seconds(5)) == Status::Ok);
  const PulledRows after = w.rows(again.value);
  CHECK(after.rows[static_cast<std::size_t>(after.index[3]) * 8] == initial_value(r.table, 10, 0) - 2.0f);
  CHECK(w.commit(q.value) == Status::BadRequest);  // sent already
}
