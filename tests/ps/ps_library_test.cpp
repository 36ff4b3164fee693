// The parameter-server library without processes (suite 'unit'): the
// placement hash and dense slices, a Shard's arithmetic (SGD and Adagrad
// against hand-computed float32 references, duplicate keys coalesced,
// assign, Adagrad's state read and set apart from the values), its
// validation (every malformed request refused, nothing applied), and a
// Worker over an in-process link that hands each request to real Shards:
// coalescing, shard-grouped rows, push_rows, shard refusals, calls that
// never come back (timeout), and ticket reuse.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "client/ps/key_index.h"
#include "ferry/ps/shard.h"
#include "ferry/ps/shard_link.h"
#include "ferry/ps/worker.h"
#include "tests/ps/in_process_link.h"
#include "tests/ps/made.h"

using namespace ferry;
using namespace ferry::ps;
using namespace ferry::ps::test;

namespace {

TableSpec embedding(TableId id, std::uint32_t dim, std::uint64_t rows, OptimizerKind opt, float lr) {
  TableSpec t;
  t.id = id;
  t.name = "emb" + std::to_string(id);
  t.kind = TableKind::Embedding;
  t.dim = dim;
  t.rows = rows;
  t.optimizer.kind = opt;
  t.optimizer.lr = lr;
  t.init.kind = InitKind::Uniform;
  t.init.scale = 0.5f;
  t.init.seed = 7;
  return t;
}

TableSpec dense(TableId id, std::uint64_t size, float lr) {
  TableSpec t;
  t.id = id;
  t.name = "dense";
  t.kind = TableKind::Dense;
  t.dim = 1;
  t.rows = size;
  t.optimizer.lr = lr;
  t.init.kind = InitKind::Pattern;
  return t;
}

std::vector<std::byte> message(Op op, const TableSpec& t, const std::vector<Key>& keys, const std::vector<float>& v,
                               std::uint32_t offset = 0, std::uint32_t count = 0) {
  Header h;
  h.op = static_cast<std::uint8_t>(op);
  h.table = t.id;
  h.dim = t.dim;
  h.count = t.kind == TableKind::Embedding ? static_cast<std::uint32_t>(keys.size()) : count;
  h.offset = offset;
  std::vector<std::byte> m(sizeof h + 8 * keys.size() + 4 * v.size());
  std::memcpy(m.data(), &h, sizeof h);
  std::memcpy(m.data() + sizeof h, keys.data(), 8 * keys.size());
  std::memcpy(m.data() + sizeof h + 8 * keys.size(), v.data(), 4 * v.size());
  return m;
}

// The same request asking for the rows' optimizer state (kFlagState).
std::vector<std::byte> of_state(std::vector<std::byte> m) {
  m[offsetof(Header, flags)] = std::byte{kFlagState};
  return m;
}

// Sends one request to the shard; returns the response bytes.
std::vector<std::byte> ask(Shard& s, const std::vector<std::byte>& req, std::size_t cap = 1 << 16) {
  std::vector<std::byte> resp(cap);
  resp.resize(s.handle(req, resp));
  return resp;
}

PsStatus refusal(const std::vector<std::byte>& resp) {
  if (resp.size() != kErrorBytes) return PsStatus::Ok;
  ErrorRecord e;
  std::memcpy(&e, resp.data(), kErrorBytes);
  REQUIRE(e.mark == kErrorMark);
  return static_cast<PsStatus>(e.status);
}

std::vector<float> floats(const std::vector<std::byte>& b) {
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), 4 * f.size());
  return f;
}

// A key shard `s` of `n` owns in table `t`.
Key key_on(TableId t, std::uint32_t s, std::uint32_t n, Key from = 0) {
  while (shard_of(t, from, n) != s) ++from;
  return from;
}

}  // namespace

TEST_CASE("placement: the documented hash, stable, balanced; dense slices tile the table") {
  // Pinned values: the placement is part of the wire contract.
  CHECK(mix64(0) == 0);
  CHECK(mix64(1) == 0x5692161D100B05E5ull);
  std::vector<int> per(4, 0);
  for (Key k = 0; k < 40000; ++k) {
    const std::uint32_t s = shard_of(3, k, 4);
    REQUIRE(s < 4);
    CHECK(s == static_cast<std::uint32_t>(((mix64(k ^ table_salt(3)) >> 32) * 4) >> 32));
    ++per[s];
  }
  for (int n : per) CHECK(std::abs(n - 10000) < 400);
  std::uint64_t next = 0;
  for (std::uint32_t s = 0; s < 3; ++s) {
    const DenseSlice d = dense_slice(10, s, 3);
    CHECK(d.begin == next);
    next = d.end;
  }
  CHECK(next == 10);
  CHECK(dense_slice(2, 2, 3).size() == 0);
}

TEST_CASE("init: uniform in [-scale, scale), a pure function of (seed, table, key, column)") {
  TableSpec t = embedding(1, 8, 0, OptimizerKind::Sgd, 0.1f);
  double sum = 0;
  for (Key k = 0; k < 1000; ++k) {
    for (std::uint32_t j = 0; j < 8; ++j) {
      const float v = initial_value(t, k, j);
      REQUIRE(v >= -0.5f);
      REQUIRE(v < 0.5f);
      CHECK(v == initial_value(t, k, j));
      sum += v;
    }
  }
  CHECK(std::abs(sum / 8000) < 0.02);
  TableSpec other = t;
  other.init.seed = 8;
  CHECK(initial_value(other, 5, 0) != initial_value(t, 5, 0));
}

TEST_CASE("shard and worker: create() refuses a spec that cannot work with BadRequest and a reason") {
  const TableSpec t = embedding(0, 4, 100, OptimizerKind::Sgd, 0.5f);
  std::unique_ptr<Shard> shard;
  Error bad = Shard::create(ShardSpec{2, 2, {t}, 64}, &shard);
  CHECK(bad.status() == Status::BadRequest);
  CHECK(bad.message() == "shard 2 of 2: need 0 <= index < shards <= 256");
  CHECK(shard == nullptr);
  bad = Shard::create(ShardSpec{0, 1, {t, t}, 64}, &shard);
  CHECK(bad.message() == "table id 0 given twice");
  CHECK(shard == nullptr);
  TableSpec zero_dim = t;
  zero_dim.dim = 0;
  CHECK(Shard::create(ShardSpec{0, 1, {zero_dim}, 64}, &shard).message() == "table 0 'emb0': dim must be in [1, 4096]");
  REQUIRE(Shard::create(ShardSpec{0, 1, {t}, 64}, &shard).ok());
  CHECK(shard != nullptr);

  std::unique_ptr<Worker> worker;
  bad = Worker::create(std::make_unique<InProcessLink>(std::vector<Shard*>{}), WorkerOptions{{t}}, &worker);
  CHECK(bad.status() == Status::BadRequest);
  CHECK(bad.message() == "a worker needs 1 to 256 shards");
  WorkerOptions twice{{t, t}};
  bad = Worker::create(std::make_unique<InProcessLink>(std::vector<Shard*>{shard.get()}), twice, &worker);
  CHECK(bad.message() == "table id 0 given twice");
  CHECK(Worker::create(nullptr, WorkerOptions{{t}}, &worker).message() == "a worker needs a shard link");
  CHECK(worker == nullptr);
  REQUIRE(Worker::create(std::make_unique<InProcessLink>(std::vector<Shard*>{shard.get()}), WorkerOptions{{t}}, &worker)
              .ok());
  CHECK(worker != nullptr);
}

TEST_CASE("shard: pull gives the initial rows; SGD and Adagrad applied on push match float32 references") {
  const TableSpec sgd = embedding(0, 4, 100, OptimizerKind::Sgd, 0.5f);
  TableSpec ada = embedding(1, 4, 100, OptimizerKind::Adagrad, 0.1f);
  ada.optimizer.initial_accumulator = 0.25f;
  const auto s_made = made_shard(ShardSpec{0, 1, {sgd, ada}, 64});
  Shard& s = *s_made;
  const std::vector<Key> keys = {3, 17};
  for (const TableSpec* t : std::array<const TableSpec*, 2>{&sgd, &ada}) {
    const auto rows = floats(ask(s, message(Op::Pull, *t, keys, {})));
    REQUIRE(rows.size() == 8);
    for (std::size_t i = 0; i < 2; ++i)
      for (std::uint32_t j = 0; j < 4; ++j) CHECK(rows[i * 4 + j] == initial_value(*t, keys[i], j));
  }
  const std::vector<float> g = {1, -2, 0.5f, 0, 3, 0.25f, -1, 2};
  for (int round = 0; round < 3; ++round) {
    for (const TableSpec* t : std::array<const TableSpec*, 2>{&sgd, &ada}) {
      const auto ack = ask(s, message(Op::Push, *t, keys, g));
      REQUIRE(ack.size() == kAckBytes);
      std::uint32_t applied = 0;
      std::memcpy(&applied, ack.data(), 4);
      CHECK(applied == 2);
    }
  }
  const auto got_sgd = floats(ask(s, message(Op::Pull, sgd, keys, {})));
  const auto got_ada = floats(ask(s, message(Op::Pull, ada, keys, {})));
  for (std::size_t i = 0; i < 2; ++i) {
    for (std::uint32_t j = 0; j < 4; ++j) {
      float w = initial_value(sgd, keys[i], j);
      float v = initial_value(ada, keys[i], j), a = 0.25f;
      const float gi = g[i * 4 + j];
      for (int round = 0; round < 3; ++round) {
        w = std::fma(-0.5f, gi, w);
        a = std::fma(gi, gi, a);
        v = v + (-0.1f * gi) / (std::sqrt(a) + 1e-10f);
      }
      CHECK(got_sgd[i * 4 + j] == w);
      CHECK(got_ada[i * 4 + j] == v);
    }
  }
}

TEST_CASE("shard: duplicate keys in a push are summed and applied once (Adagrad sees one gradient)") {
  const TableSpec ada = embedding(0, 2, 0, OptimizerKind::Adagrad, 0.5f);
  const auto a_made = made_shard(ShardSpec{0, 1, {ada}, 64});
  Shard& a = *a_made;
  const auto b_made = made_shard(ShardSpec{0, 1, {ada}, 64});
  Shard& b = *b_made;
  // a: key 9 twice (1 then 2) and key 4; b: key 9 once with the sum.
  auto ack = ask(a, message(Op::Push, ada, {9, 4, 9}, {1, 1, 5, 5, 2, 2}));
  std::uint32_t applied = 0;
  std::memcpy(&applied, ack.data(), 4);
  CHECK(applied == 2);
  ask(b, message(Op::Push, ada, {9, 4}, {3, 3, 5, 5}));
  CHECK(floats(ask(a, message(Op::Pull, ada, {9, 4}, {}))) == floats(ask(b, message(Op::Pull, ada, {9, 4}, {}))));
  // Assign: the last value of a duplicate wins; pull returns it.
  ask(a, message(Op::Assign, ada, {9, 9}, {1, 2, 3, 4}));
  CHECK(floats(ask(a, message(Op::Pull, ada, {9}, {}))) == std::vector<float>{3, 4});
}

TEST_CASE("shard and worker: Adagrad's state pulls and assigns apart from the values (checkpoints)") {
  TableSpec ada = embedding(0, 2, 100, OptimizerKind::Adagrad, 0.1f);
  ada.optimizer.initial_accumulator = 0.25f;
  const TableSpec sgd = embedding(1, 2, 100, OptimizerKind::Sgd, 0.1f);
  const TableSpec d = dense(2, 10, 0.1f);
  const auto s_made = made_shard(ShardSpec{0, 1, {ada, sgd, d}, 64});
  Shard& s = *s_made;
  // A key never pushed has the initial state; a push adds g*g; assign_state sets it, values untouched.
  CHECK(floats(ask(s, of_state(message(Op::Pull, ada, {3, 4}, {})))) == std::vector<float>{0.25f, 0.25f, 0.25f, 0.25f});
  ask(s, message(Op::Push, ada, {3}, {1, 2}));
  CHECK(floats(ask(s, of_state(message(Op::Pull, ada, {3, 4}, {})))) == std::vector<float>{1.25f, 4.25f, 0.25f, 0.25f});
  const auto values = floats(ask(s, message(Op::Pull, ada, {3, 4}, {})));
  const auto ack = ask(s, of_state(message(Op::Assign, ada, {4, 3, 4}, {7, 7, 5, 6, 8, 9})));
  REQUIRE(ack.size() == kAckBytes);
  CHECK(floats(ask(s, of_state(message(Op::Pull, ada, {3, 4}, {})))) == std::vector<float>{5, 6, 8, 9});
  CHECK(floats(ask(s, message(Op::Pull, ada, {3, 4}, {}))) == values);
  // Refused, changing nothing: a negative state, the flag on a push, on SGD (embedding or dense).
  CHECK(refusal(ask(s, of_state(message(Op::Assign, ada, {3}, {1, -1})))) == PsStatus::BadField);
  CHECK(refusal(ask(s, of_state(message(Op::Push, ada, {3}, {1, 1})))) == PsStatus::BadField);
  CHECK(refusal(ask(s, of_state(message(Op::Pull, sgd, {3}, {})))) == PsStatus::BadField);
  CHECK(refusal(ask(s, of_state(message(Op::Pull, d, {}, {}, 0, 2)))) == PsStatus::BadField);
  CHECK(floats(ask(s, of_state(message(Op::Pull, ada, {3, 4}, {})))) == std::vector<float>{5, 6, 8, 9});
  // An assign of values restarts the state.
  ask(s, message(Op::Assign, ada, {3}, {0, 0}));
  CHECK(floats(ask(s, of_state(message(Op::Pull, ada, {3}, {})))) == std::vector<float>{0.25f, 0.25f});

  // Through a worker, over two shards (each key's request goes to its owner).
  const auto w0_made = made_shard(ShardSpec{0, 2, {ada, sgd}, 64});
  const auto w1_made = made_shard(ShardSpec{1, 2, {ada, sgd}, 64});
  auto link = std::make_unique<InProcessLink>(std::vector<Shard*>{w0_made.get(), w1_made.get()});
  const auto w_made = made_worker(std::move(link), WorkerOptions{{ada, sgd}});
  Worker& w = *w_made;
  const Key k0 = key_on(0, 0, 2), k1 = key_on(0, 1, 2);
  const std::vector<Key> keys = {k0, k1};
  const auto set = w.assign_state(0, keys, std::vector<float>{1, 2, 3, 4});
  REQUIRE(set);
  REQUIRE(w.wait(set.value, std::chrono::seconds(1)) == Status::Ok);
  const auto got = w.pull_state(0, std::vector<Key>{k1, k0, k1});
  REQUIRE(got);
  REQUIRE(w.wait(got.value, std::chrono::seconds(1)) == Status::Ok);
  const PulledRows r = w.rows(got.value);
  for (const Key k : {k0, k1}) {
    std::size_t row = 0;
    while (r.keys[row] != k) ++row;
    CHECK(r.rows[row * 2] == (k == k0 ? 1.0f : 3.0f));
    CHECK(r.rows[row * 2 + 1] == (k == k0 ? 2.0f : 4.0f));
  }
  CHECK(w.pull_state(1, keys).status == Status::BadRequest);  // SGD keeps no state
  CHECK(w.assign_state(0, keys, std::vector<float>{1}).status == Status::BadRequest);
}

TEST_CASE("shard and worker: a dense table's Adagrad state pulls and assigns apart from its values") {
  TableSpec d = dense(0, 10, 0.1f);
  d.optimizer.kind = OptimizerKind::Adagrad;
  d.optimizer.initial_accumulator = 0.5f;
  const auto s1_made = made_shard(ShardSpec{1, 2, {d}, 64});
  Shard& s1 = *s1_made;  // holds [5, 10)
  CHECK(floats(ask(s1, of_state(message(Op::Pull, d, {}, {}, 5, 2)))) == std::vector<float>{0.5f, 0.5f});
  ask(s1, message(Op::Push, d, {}, {2, 3}, 5, 2));
  CHECK(floats(ask(s1, of_state(message(Op::Pull, d, {}, {}, 5, 2)))) == std::vector<float>{4.5f, 9.5f});
  const auto values = floats(ask(s1, message(Op::Pull, d, {}, {}, 5, 5)));
  REQUIRE(ask(s1, of_state(message(Op::Assign, d, {}, {1, 2}, 6, 2))).size() == kAckBytes);
  CHECK(floats(ask(s1, of_state(message(Op::Pull, d, {}, {}, 5, 3)))) == std::vector<float>{4.5f, 1, 2});
  CHECK(floats(ask(s1, message(Op::Pull, d, {}, {}, 5, 5))) == values);  // the values stay
  // Refused, changing nothing: negative, outside the slice, on a push.
  CHECK(refusal(ask(s1, of_state(message(Op::Assign, d, {}, {-1}, 5, 1)))) == PsStatus::BadField);
  CHECK(refusal(ask(s1, of_state(message(Op::Pull, d, {}, {}, 4, 2)))) == PsStatus::BadRange);
  CHECK(refusal(ask(s1, of_state(message(Op::Push, d, {}, {1}, 5, 1)))) == PsStatus::BadField);
  CHECK(floats(ask(s1, of_state(message(Op::Pull, d, {}, {}, 5, 1)))) == std::vector<float>{4.5f});
  // An assign of values restarts the state.
  ask(s1, message(Op::Assign, d, {}, {0}, 5, 1));
  CHECK(floats(ask(s1, of_state(message(Op::Pull, d, {}, {}, 5, 1)))) == std::vector<float>{0.5f});

  // Through a worker, over two shards: the whole table, each slice from its owner.
  const auto w0_made = made_shard(ShardSpec{0, 2, {d}, 64});
  const auto w1_made = made_shard(ShardSpec{1, 2, {d}, 64});
  auto link = std::make_unique<InProcessLink>(std::vector<Shard*>{w0_made.get(), w1_made.get()});
  const auto w_made = made_worker(std::move(link), WorkerOptions{{d}});
  Worker& w = *w_made;
  std::vector<float> state(10);
  for (std::size_t e = 0; e < state.size(); ++e) state[e] = static_cast<float>(e) + 0.25f;
  const auto set = w.assign_dense_state(0, state);
  REQUIRE(set);
  REQUIRE(w.wait(set.value, std::chrono::seconds(1)) == Status::Ok);
  const auto got = w.pull_dense_state(0);
  REQUIRE(got);
  REQUIRE(w.wait(got.value, std::chrono::seconds(1)) == Status::Ok);
  const PulledRows r = w.rows(got.value);
  CHECK(std::vector<float>(r.rows.begin(), r.rows.end()) == state);
  CHECK(w.assign_dense_state(0, std::vector<float>{1}).status == Status::BadRequest);  // not the table's size
  const TableSpec sgd = dense(1, 4, 0.1f);
  const auto sgd_shard = made_shard(ShardSpec{0, 1, {sgd}, 64});
  auto sgd_link = std::make_unique<InProcessLink>(std::vector<Shard*>{sgd_shard.get()});
  const auto sgd_worker = made_worker(std::move(sgd_link), WorkerOptions{{sgd}});
  CHECK(sgd_worker->pull_dense_state(1).status == Status::BadRequest);  // SGD keeps no state
}

TEST_CASE("shard: dense slices pull, push and refuse ranges they do not hold") {
  const TableSpec d = dense(2, 10, 0.25f);
  const auto s1_made = made_shard(ShardSpec{1, 2, {d}, 64});
  Shard& s1 = *s1_made;  // holds [5, 10)
  const auto vals = floats(ask(s1, message(Op::Pull, d, {}, {}, 5, 5)));
  REQUIRE(vals.size() == 5);
  for (int e = 0; e < 5; ++e) CHECK(vals[e] == initial_value(d, 5 + e, 0));
  CHECK(refusal(ask(s1, message(Op::Pull, d, {}, {}, 4, 2))) == PsStatus::BadRange);
  ask(s1, message(Op::Push, d, {}, {4, 4}, 6, 2));
  const auto after = floats(ask(s1, message(Op::Pull, d, {}, {}, 6, 2)));
  CHECK(after[0] == initial_value(d, 6, 0) - 1.0f);
  CHECK(after[1] == initial_value(d, 7, 0) - 1.0f);
}

TEST_CASE("shard: every malformed request is refused with its status and changes nothing") {
  const TableSpec t = embedding(0, 2, 50, OptimizerKind::Sgd, 1.0f);
  const auto s_made = made_shard(ShardSpec{0, 2, {t}, 8});
  Shard& s = *s_made;
  const Key mine = key_on(0, 0, 2), other = key_on(0, 1, 2);
  const auto before = floats(ask(s, message(Op::Pull, t, {mine}, {})));
  auto with = [&](auto edit) {
    auto m = message(Op::Push, t, {mine}, {1, 1});
    Header h;
    std::memcpy(&h, m.data(), sizeof h);
    edit(h, m);
    std::memcpy(m.data(), &h, sizeof h);
    return refusal(ask(s, m));
  };
  CHECK(with([](Header& h, auto&) { h.magic = 1; }) == PsStatus::BadMagic);
  CHECK(with([](Header& h, auto&) { h.version = 1; }) == PsStatus::BadVersion);
  CHECK(with([](Header& h, auto&) { h.op = 0; }) == PsStatus::BadOp);
  CHECK(with([](Header& h, auto&) { h.flags = 2; }) == PsStatus::BadField);
  CHECK(with([](Header& h, auto&) { h.dtype = 1; }) == PsStatus::BadField);
  CHECK(with([](Header& h, auto&) { h.table = 3; }) == PsStatus::BadTable);
  CHECK(with([](Header& h, auto&) { h.dim = 3; }) == PsStatus::BadDim);
  CHECK(with([](Header& h, auto&) { h.count = 9; }) == PsStatus::TooLarge);
  CHECK(with([](Header& h, auto&) { h.count = 2; }) == PsStatus::BadLength);
  CHECK(with([](Header&, auto& m) { m.pop_back(); }) == PsStatus::BadLength);
  CHECK(refusal(ask(s, std::vector<std::byte>(10))) == PsStatus::BadLength);
  CHECK(refusal(ask(s, message(Op::Push, t, {mine, other}, {1, 1, 1, 1}))) == PsStatus::BadKey);
  CHECK(refusal(ask(s, message(Op::Push, t, {mine, 50}, {1, 1, 1, 1}))) == PsStatus::BadKey);
  CHECK(refusal(ask(s, message(Op::Pull, t, {mine, mine}, {}), 7)) == PsStatus::TooLarge);
  CHECK(floats(ask(s, message(Op::Pull, t, {mine}, {}))) == before);
  CHECK(s.counters().rejected == 14);
}

TEST_CASE("worker: pulls coalesce duplicates, rows grouped by shard, index maps every key to its row") {
  const TableSpec t = embedding(0, 3, 1000, OptimizerKind::Sgd, 0.5f);
  const auto s0_made = made_shard(ShardSpec{0, 2, {t}, 4096});
  Shard& s0 = *s0_made;
  const auto s1_made = made_shard(ShardSpec{1, 2, {t}, 4096});
  Shard& s1 = *s1_made;
  auto link = std::make_unique<InProcessLink>(std::vector<Shard*>{&s0, &s1});
  InProcessLink& l = *link;
  const auto w_made = made_worker(std::move(link), WorkerOptions{{t}});
  Worker& w = *w_made;
  const std::vector<Key> keys = {5, 9, 5, 700, 9, 9, 42, 5};
  const auto p = w.pull(0, keys);
  REQUIRE(p);
  CHECK(w.status(p.value) == Status::Busy);
  REQUIRE(w.wait(p.value, std::chrono::seconds(1)) == Status::Ok);
  CHECK(l.calls <= 2);
  const PulledRows r = w.rows(p.value);
  REQUIRE(r.keys.size() == 4);
  REQUIRE(r.rows.size() == 12);
  REQUIRE(r.index.size() == keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    CHECK(r.keys[static_cast<std::size_t>(r.index[i])] == keys[i]);
    for (std::uint32_t j = 0; j < 3; ++j)
      CHECK(r.rows[static_cast<std::size_t>(r.index[i]) * 3 + j] == initial_value(t, keys[i], j));
  }
  for (std::size_t row = 0; row < r.keys.size(); ++row) {
    const std::uint32_t s = shard_of(0, r.keys[row], 2);
    CHECK(row >= r.shard_rows[s]);
    CHECK(row < r.shard_rows[s + 1]);
  }
  // push_rows: one gradient per pulled row; push: duplicates summed.
  std::vector<float> g(12, 1.0f);
  const auto q = w.push_rows(p.value, g);
  REQUIRE(q);
  REQUIRE(w.wait(q.value, std::chrono::seconds(1)) == Status::Ok);
  const auto q2 = w.push(0, std::vector<Key>{42, 42}, std::vector<float>{1, 1, 1, 2, 2, 2});
  REQUIRE(q2);
  REQUIRE(w.wait(q2.value, std::chrono::seconds(1)) == Status::Ok);
  const auto p2 = w.pull(0, std::vector<Key>{42, 5});
  REQUIRE(w.wait(p2.value, std::chrono::seconds(1)) == Status::Ok);
  const PulledRows r2 = w.rows(p2.value);
  const float k42 = r2.rows[static_cast<std::size_t>(r2.index[0]) * 3];
  const float k5 = r2.rows[static_cast<std::size_t>(r2.index[1]) * 3];
  CHECK(k42 == initial_value(t, 42, 0) - 0.5f * 1.0f - 0.5f * 3.0f);
  CHECK(k5 == initial_value(t, 5, 0) - 0.5f);
  for (Ticket x : {p.value, q.value, q2.value, p2.value}) w.release(x);
  CHECK(w.live_ops() == 0);
  CHECK(w.status(p.value) == Status::BadRequest);  // a released ticket is gone
}

TEST_CASE("worker: dense tables pull whole and push by slice; bad arguments start nothing") {
  const TableSpec d = dense(1, 7, 1.0f);
  const auto s0_made = made_shard(ShardSpec{0, 3, {d}, 64});
  Shard& s0 = *s0_made;
  const auto s1_made = made_shard(ShardSpec{1, 3, {d}, 64});
  Shard& s1 = *s1_made;
  const auto s2_made = made_shard(ShardSpec{2, 3, {d}, 64});
  Shard& s2 = *s2_made;
  const auto w_made =
      made_worker(std::make_unique<InProcessLink>(std::vector<Shard*>{&s0, &s1, &s2}), WorkerOptions{{d}});
  Worker& w = *w_made;
  const auto push = w.push_dense(1, std::vector<float>(7, 2.0f));
  REQUIRE(push);
  REQUIRE(w.wait(push.value, std::chrono::seconds(1)) == Status::Ok);
  const auto p = w.pull_dense(1);
  REQUIRE(w.wait(p.value, std::chrono::seconds(1)) == Status::Ok);
  const PulledRows r = w.rows(p.value);
  REQUIRE(r.rows.size() == 7);
  for (int e = 0; e < 7; ++e) CHECK(r.rows[e] == initial_value(d, e, 0) - 2.0f);
  CHECK(w.pull(1, std::vector<Key>{1}).status == Status::BadRequest);          // not an embedding table
  CHECK(w.push_dense(1, std::vector<float>(6)).status == Status::BadRequest);  // wrong size
  CHECK(w.pull_dense(9).status == Status::BadRequest);                         // no such table
}

TEST_CASE("worker: a shard's refusal names the shard and status; a lost call times out; memory waits for calls") {
  const TableSpec t = embedding(0, 2, 0, OptimizerKind::Sgd, 1.0f);
  TableSpec wrong = t;
  wrong.dim = 3;  // the shards were configured differently
  const auto s0_made = made_shard(ShardSpec{0, 2, {wrong}, 64});
  Shard& s0 = *s0_made;
  const auto s1_made = made_shard(ShardSpec{1, 2, {t}, 64});
  Shard& s1 = *s1_made;
  auto link = std::make_unique<InProcessLink>(std::vector<Shard*>{&s0, &s1});
  InProcessLink& l = *link;
  WorkerOptions o{{t}};
  o.timeout = std::chrono::milliseconds(50);
  const auto w_made = made_worker(std::move(link), o);
  Worker& w = *w_made;
  const Key on0 = key_on(0, 0, 2), on1 = key_on(0, 1, 2);
  const auto p = w.pull(0, std::vector<Key>{on0, on1});
  REQUIRE(w.wait(p.value, std::chrono::seconds(1)) == Status::BadRequest);
  CHECK(w.error(p.value).shard == 0);
  CHECK(w.error(p.value).ps == PsStatus::BadDim);
  CHECK(w.rows(p.value).rows.empty());
  w.release(p.value);

  l.drop.insert(1);  // shard 1 never answers
  const auto lost = w.pull(0, std::vector<Key>{on1});
  REQUIRE(lost);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(w.wait(lost.value, std::chrono::seconds(5)) == Status::Timeout);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  w.release(lost.value);
  CHECK(w.live_ops() == 1);  // its call never came back: the memory stays reserved
}

TEST_CASE("worker: at most max_ops tickets live; released ones are reused") {
  const TableSpec t = embedding(0, 1, 0, OptimizerKind::Sgd, 1.0f);
  const auto s_made = made_shard(ShardSpec{0, 1, {t}, 64});
  Shard& s = *s_made;
  WorkerOptions o{{t}};
  o.max_ops = 2;
  const auto w_made = made_worker(std::make_unique<InProcessLink>(std::vector<Shard*>{&s}), o);
  Worker& w = *w_made;
  const auto a = w.pull(0, std::vector<Key>{1});
  const auto b = w.pull(0, std::vector<Key>{2});
  REQUIRE(a);
  REQUIRE(b);
  CHECK(w.pull(0, std::vector<Key>{3}).status == Status::Busy);
  REQUIRE(w.wait(a.value, std::chrono::seconds(1)) == Status::Ok);
  w.release(a.value);
  const auto c = w.pull(0, std::vector<Key>{3});
  REQUIRE(c);
  CHECK(c.value != a.value);
  CHECK(w.status(a.value) == Status::BadRequest);
  REQUIRE(w.wait(c.value, std::chrono::seconds(1)) == Status::Ok);
  w.release(b.value);
  w.release(c.value);
  const auto empty = w.pull(0, std::vector<Key>{});
  REQUIRE(empty);
  CHECK(w.status(empty.value) == Status::Ok);
  CHECK(w.rows(empty.value).rows.empty());
}

TEST_CASE("init: a whole row (initial_row) is initial_value column by column, for every init kind") {
  for (const InitKind kind : {InitKind::Zeros, InitKind::Uniform, InitKind::Pattern}) {
    TableSpec t = embedding(3, 37, 0, OptimizerKind::Sgd, 0.1f);
    t.init.kind = kind;
    std::vector<float> row(37);
    for (const Key k : {Key{0}, Key{1}, Key{12345}, ~Key{0}}) {
      initial_row(t, k, row.data());
      for (std::uint32_t j = 0; j < 37; ++j) CHECK(row[j] == initial_value(t, k, j));
    }
  }
}

TEST_CASE("shard: rows of a bounded table (direct index) and of an unbounded one (hash) behave the same") {
  // dim 37: SGD's vectorized blocks and its scalar tail both run.
  const TableSpec bounded = embedding(0, 37, 1000, OptimizerKind::Sgd, 0.5f);
  const TableSpec unbounded = embedding(1, 37, 0, OptimizerKind::Sgd, 0.5f);
  const auto s_made = made_shard(ShardSpec{1, 2, {bounded, unbounded}, 64});
  Shard& s = *s_made;
  std::vector<Key> mine, foreign;
  for (Key k = 0; mine.size() < 5 || foreign.empty(); ++k)
    (shard_of(0, k, 2) == 1 && shard_of(1, k, 2) == 1 ? mine : foreign).push_back(k);
  for (const TableSpec* t : std::array<const TableSpec*, 2>{&bounded, &unbounded}) {
    CHECK(s.find(t->id, mine[0]) == nullptr);  // never touched
    std::vector<float> g(mine.size() * 37);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 11) - 5.0f;
    REQUIRE(ask(s, message(Op::Push, *t, mine, g)).size() == kAckBytes);
    const auto rows = floats(ask(s, message(Op::Pull, *t, mine, {})));
    REQUIRE(rows.size() == g.size());
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const float* held = s.find(t->id, mine[i]);
      REQUIRE(held != nullptr);
      for (std::uint32_t j = 0; j < 37; ++j) {
        const float want = std::fma(-0.5f, g[i * 37 + j], initial_value(*t, mine[i], j));
        CHECK(rows[i * 37 + j] == want);
        CHECK(held[j] == want);
      }
    }
    CHECK(s.find(t->id, foreign[0]) == nullptr);
  }
  CHECK(s.find(0, 5000) == nullptr);  // past the bounded table's range
  CHECK(ask(s, message(Op::Pull, bounded, {5000}, {})).size() == kErrorBytes);
}

TEST_CASE("shard: preload creates every owned row of a bounded table up front, with the same values") {
  const TableSpec t = embedding(0, 8, 500, OptimizerKind::Sgd, 0.5f);
  ShardSpec spec{1, 3, {t}, 512};
  const auto lazy_made = made_shard(spec);
  Shard& lazy = *lazy_made;
  spec.preload = true;
  const auto eager_made = made_shard(spec);
  Shard& eager = *eager_made;
  std::vector<Key> owned;
  for (Key k = 0; k < 500; ++k) {
    const bool mine = shard_of(0, k, 3) == 1;
    if (mine) owned.push_back(k);
    const float* row = eager.find(0, k);
    REQUIRE((row != nullptr) == mine);
    CHECK(lazy.find(0, k) == nullptr);
    for (std::uint32_t j = 0; mine && j < 8; ++j) CHECK(row[j] == initial_value(t, k, j));
  }
  std::vector<float> g(owned.size() * 8, 1.0f);
  REQUIRE(ask(lazy, message(Op::Push, t, owned, g)).size() == kAckBytes);
  REQUIRE(ask(eager, message(Op::Push, t, owned, g)).size() == kAckBytes);
  const auto a = floats(ask(lazy, message(Op::Pull, t, owned, {}), 1 << 20));
  REQUIRE(a.size() == owned.size() * 8);
  CHECK(a == floats(ask(eager, message(Op::Pull, t, owned, {}), 1 << 20)));
}

TEST_CASE("key index: reset forgets every key at once, across sizes, and numbers keys in first-seen order") {
  detail::KeyIndex index;
  bool inserted = false;
  for (int round = 0; round < 3; ++round) {
    for (const std::uint64_t n : {std::uint64_t{600}, std::uint64_t{5}, std::uint64_t{2000}}) {
      index.reset(n);
      CHECK(index.size() == 0);
      CHECK(index.find(7) == detail::KeyIndex::kNone);  // inserted by every earlier pass
      for (Key k = 0; k < n; ++k) {
        REQUIRE(index.insert(k * 7, &inserted) == k);
        CHECK(inserted);
      }
      for (Key k = 0; k < n; ++k) {
        CHECK(index.insert(k * 7, &inserted) == k);
        CHECK_FALSE(inserted);
        CHECK(index.find(k * 7) == k);
      }
      CHECK(index.find(7 * n) == detail::KeyIndex::kNone);
      CHECK(index.size() == n);
    }
  }
  // Growing past the reserved count (a shard's unbounded table) keeps every key.
  detail::KeyIndex grown(4);
  for (Key k = 0; k < 10000; ++k) REQUIRE(grown.insert(k ^ 0x5555, &inserted) == k);
  for (Key k = 0; k < 10000; ++k) CHECK(grown.find(k ^ 0x5555) == k);
}
