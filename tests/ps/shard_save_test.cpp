// Shard-side checkpoints (suite 'unit'): Worker::save steps every shard
// through writing its part of a table into its checkpoint directory, a
// step of rows at a time; a shard started with ShardSpec::restore holds
// the same rows, values and optimizer state, bit for bit; an unfinished
// save leaves nothing a restore would take; and the refusals: no
// checkpoint directory, a bad name, a name already used, a step that does
// not continue the save, a caller the access list does not name, and
// a checkpoint restored with another shard count (every part read, each
// row kept by its new shard); restores that cannot be (a part missing,
// another width, no part);
// a disk that fills mid-save keeps nothing.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ferry/ps/shard.h"
#include "ferry/ps/worker.h"
#include "tests/ps/in_process_link.h"
#include "tests/ps/made.h"
#include "tests/ps/temp_dir.h"

using namespace ferry;
using namespace ferry::ps;
using namespace ferry::ps::test;
namespace fs = std::filesystem;

namespace {

TableSpec embedding(std::uint32_t dim, std::uint64_t rows) {
  TableSpec t;
  t.id = 0;
  t.name = "emb";
  t.dim = dim;
  t.rows = rows;
  t.optimizer.kind = OptimizerKind::Adagrad;
  t.optimizer.lr = 0.1f;
  t.optimizer.initial_accumulator = 0.1f;
  t.init.kind = InitKind::Uniform;
  t.init.scale = 0.5f;
  t.init.seed = 7;
  return t;
}

TableSpec dense(std::uint64_t size) {
  TableSpec t;
  t.id = 1;
  t.name = "mlp";
  t.kind = TableKind::Dense;
  t.rows = size;
  t.optimizer.kind = OptimizerKind::Sgd;
  t.init.kind = InitKind::Pattern;
  return t;
}

// Shards 0..n-1 of `tables`, a worker over them (in-process link).
struct Rig {
  Rig(std::vector<TableSpec> tables, std::uint32_t n, const std::string& dir, const std::string& restore = "") {
    std::vector<Shard*> raw;
    for (std::uint32_t i = 0; i < n; ++i) {
      ShardSpec spec{i, n, tables, 1u << 16};
      spec.checkpoint_dir = dir;
      spec.restore = restore;
      shards.push_back(made_shard(spec));
      raw.push_back(shards.back().get());
    }
    auto l = std::make_unique<InProcessLink>(raw);
    link = l.get();
    worker = made_worker(std::move(l), WorkerOptions{tables});
  }
  std::vector<std::unique_ptr<Shard>> shards;
  InProcessLink* link = nullptr;
  std::unique_ptr<Worker> worker;
};

// Saves `table` as NAME in steps of `step` rows: Ok, or the first failure.
Status save_all(Worker& w, TableId table, const std::string& name, std::uint32_t step, int* steps = nullptr) {
  std::vector<std::uint32_t> first(w.shards(), 0);
  for (int n = 1;; ++n) {
    const auto t = w.save(table, name, first, step);
    if (!t) return t.status;
    const Status st = w.wait(t.value, std::chrono::seconds(10));
    if (st != Status::Ok) {
      w.release(t.value);
      return st;
    }
    const auto saved = w.saved(t.value);
    bool more = false;
    for (std::uint32_t s = 0; s < w.shards(); ++s) {
      if (first[s] == Worker::kSaveSkip) continue;
      first[s] = saved[s] < step ? Worker::kSaveSkip : first[s] + saved[s];
      more = more || first[s] != Worker::kSaveSkip;
    }
    w.release(t.value);
    if (!more) {
      if (steps) *steps = n;
      return Status::Ok;
    }
  }
}

std::vector<float> pulled(Worker& w, TableId table, const std::vector<Key>& keys, bool state) {
  const auto t = state ? w.pull_state(table, keys) : w.pull(table, keys);
  REQUIRE(t);
  REQUIRE(w.wait(t.value, std::chrono::seconds(10)) == Status::Ok);
  const PulledRows r = w.rows(t.value);
  const std::size_t dim = w.table(table)->dim;
  std::vector<float> out(keys.size() * dim);
  for (std::size_t i = 0; i < keys.size(); ++i)
    std::memcpy(&out[i * dim], &r.rows[static_cast<std::size_t>(r.index[i]) * dim], 4 * dim);
  w.release(t.value);
  return out;
}

std::vector<float> pulled_dense(Worker& w, TableId table) {
  const auto t = w.pull_dense(table);
  REQUIRE(t);
  REQUIRE(w.wait(t.value, std::chrono::seconds(10)) == Status::Ok);
  const PulledRows r = w.rows(t.value);
  std::vector<float> out(r.rows.begin(), r.rows.end());
  w.release(t.value);
  return out;
}

void train(Worker& w, const std::vector<Key>& keys, std::uint32_t dim) {
  std::vector<float> g(keys.size() * dim);
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>((i * 7 + round) % 13) / 8.0f - 0.75f;
    const auto t = w.push(0, keys, g);
    REQUIRE(t);
    REQUIRE(w.wait(t.value, std::chrono::seconds(10)) == Status::Ok);
    w.release(t.value);
  }
  std::vector<float> d(w.table(1)->rows, 0.25f);
  const auto t = w.push_dense(1, d);
  REQUIRE(t);
  REQUIRE(w.wait(t.value, std::chrono::seconds(10)) == Status::Ok);
  w.release(t.value);
}

}  // namespace

TEST_CASE("shard-side save: parts written in steps restore bit for bit, state included") {
  TempDir dir;
  const std::vector<TableSpec> tables{embedding(8, 0), dense(1000)};  // rows 0: any 64-bit key
  std::vector<Key> keys;
  for (Key k = 0; k < 2500; ++k) keys.push_back(k * 0x9E3779B97F4A7C15ull);
  Rig a(tables, 3, dir.path);
  train(*a.worker, keys, 8);
  int steps = 0;
  REQUIRE(save_all(*a.worker, 0, "step-100", 300, &steps) == Status::Ok);
  CHECK(steps >= 3);  // about 833 rows a shard, 300 a step
  REQUIRE(save_all(*a.worker, 1, "step-100", 100) == Status::Ok);
  for (std::uint32_t s = 0; s < 3; ++s) {
    const std::string part = dir.path + "/step-100/emb.shard-" + std::to_string(s) + "-of-3";
    CHECK(fs::exists(part + ".json"));
    CHECK(fs::exists(part + ".keys.npy"));
    CHECK(fs::exists(part + ".state.npy"));
    CHECK(fs::exists(dir.path + "/step-100/mlp.shard-" + std::to_string(s) + "-of-3.values.npy"));
    CHECK_FALSE(fs::exists(dir.path + "/step-100/mlp.shard-" + std::to_string(s) + "-of-3.state.npy"));  // SGD
  }
  for (const auto& e : fs::directory_iterator(dir.path + "/step-100"))
    CHECK(e.path().filename().string()[0] != '.');  // no hidden file left behind

  Rig b(tables, 3, dir.path, "step-100");
  CHECK(pulled(*b.worker, 0, keys, false) == pulled(*a.worker, 0, keys, false));
  CHECK(pulled(*b.worker, 0, keys, true) == pulled(*a.worker, 0, keys, true));
  CHECK(pulled_dense(*b.worker, 1) == pulled_dense(*a.worker, 1));
  for (std::uint32_t s = 0; s < 3; ++s) CHECK(b.shards[s]->usage()[0].rows == a.shards[s]->usage()[0].rows);
  // Trained on, both give the same rows: the optimizer state came back too.
  train(*a.worker, keys, 8);
  train(*b.worker, keys, 8);
  CHECK(pulled(*b.worker, 0, keys, false) == pulled(*a.worker, 0, keys, false));
}

TEST_CASE("shard-side save: a checkpoint of 3 shards restores on 2 and on 4, each row on its new shard") {
  TempDir dir;
  const std::vector<TableSpec> tables{embedding(8, 0), dense(1001)};
  std::vector<Key> keys;
  for (Key k = 0; k < 2000; ++k) keys.push_back(k * 0x9E3779B97F4A7C15ull + 11);
  Rig a(tables, 3, dir.path);
  train(*a.worker, keys, 8);
  REQUIRE(save_all(*a.worker, 0, "three", 250) == Status::Ok);
  REQUIRE(save_all(*a.worker, 1, "three", 250) == Status::Ok);
  std::uint64_t held = 0;
  for (const auto& sh : a.shards) held += sh->usage()[0].rows;
  for (const std::uint32_t n : {2u, 4u}) {
    Rig b(tables, n, dir.path, "three");
    CHECK(pulled(*b.worker, 0, keys, false) == pulled(*a.worker, 0, keys, false));
    CHECK(pulled(*b.worker, 0, keys, true) == pulled(*a.worker, 0, keys, true));
    CHECK(pulled_dense(*b.worker, 1) == pulled_dense(*a.worker, 1));
    std::uint64_t now = 0;
    for (const auto& sh : b.shards) now += sh->usage()[0].rows;
    CHECK(now == held);  // every row once, on the shard that owns it now
  }
}

TEST_CASE("shard-side save: what a shard refuses") {
  TempDir dir;
  const std::vector<TableSpec> tables{embedding(4, 100), dense(10)};
  Rig r(tables, 2, dir.path);
  Worker& w = *r.worker;
  std::vector<Key> keys{1, 2, 3, 50, 99};
  train(w, keys, 4);
  auto refused = [&](const std::string& name, std::vector<std::uint32_t> first, std::uint32_t count = 10) {
    const auto t = w.save(0, name, first, count);
    if (!t) return std::pair{t.status, PsStatus::Ok};
    const Status st = w.wait(t.value, std::chrono::seconds(10));
    const PsStatus ps = w.error(t.value).ps;
    w.release(t.value);
    return std::pair{st, ps};
  };
  CHECK(refused(".hidden", {0, 0}) == std::pair{Status::BadRequest, PsStatus::BadField});
  CHECK(refused("a/b", {0, 0}) == std::pair{Status::BadRequest, PsStatus::BadField});
  CHECK(refused("", {0, 0}).first == Status::BadRequest);       // refused by the worker: nothing sent
  CHECK(refused("ok", {0, 0}, 0).first == Status::BadRequest);  // a step of no rows
  CHECK(refused("ok", {0}).first == Status::BadRequest);        // one cursor per shard
  CHECK(refused("ok", {5, 5}) == std::pair{Status::BadRequest, PsStatus::BadRange});  // no save in progress
  // A save in progress, then a step that does not continue it.
  CHECK(refused("ok", {0, Worker::kSaveSkip}, 1) == std::pair{Status::Ok, PsStatus::Ok});
  CHECK(refused("ok", {7, Worker::kSaveSkip}, 1) == std::pair{Status::BadRequest, PsStatus::BadRange});
  // Unfinished: nothing but hidden files, and nothing a restore would take.
  for (const auto& e : fs::directory_iterator(dir.path + "/ok")) CHECK(e.path().filename().string()[0] == '.');
  std::unique_ptr<Shard> s;
  ShardSpec spec{0, 2, tables, 1u << 16};
  spec.checkpoint_dir = dir.path;
  spec.restore = "ok";
  Error e = Shard::create(spec, &s);
  CHECK(e.message().find("checkpoint 'ok' has no part of table 'emb' for shard 0 of 2") == 0);
  // Finished, the name is taken.
  REQUIRE(save_all(w, 0, "ok", 2) == Status::Ok);
  CHECK(refused("ok", {0, 0}) == std::pair{Status::BadRequest, PsStatus::Exists});
  // ... and refusing it leaves a save in progress of another name alone.
  CHECK(refused("later", {0, Worker::kSaveSkip}, 1) == std::pair{Status::Ok, PsStatus::Ok});
  CHECK(refused("ok", {0, Worker::kSaveSkip}, 1) == std::pair{Status::BadRequest, PsStatus::Exists});
  CHECK(refused("later", {1, Worker::kSaveSkip}, 100) == std::pair{Status::Ok, PsStatus::Ok});
  CHECK(fs::exists(dir.path + "/later/emb.shard-0-of-2.json"));
  for (const auto& e2 : fs::directory_iterator(dir.path + "/ok")) CHECK(e2.path().filename().string()[0] != '.');
  // Restores that cannot be: another shard count without every part here.
  REQUIRE(save_all(w, 1, "ok", 4) == Status::Ok);
  fs::rename(dir.path + "/ok/emb.shard-1-of-2.json", dir.path + "/ok/elsewhere.json");
  spec.shards = 3;
  e = Shard::create(spec, &s);
  CHECK(e.message() == "checkpoint 'ok' holds table 'emb' as 2 shards' parts, and " + dir.path +
                           "/ok/emb.shard-1-of-2.json is not here: to restore it with 3 shards, give every shard "
                           "all 2 parts (copy them here, or use a shared directory)");
  fs::rename(dir.path + "/ok/elsewhere.json", dir.path + "/ok/emb.shard-1-of-2.json");
  CHECK(Shard::create(spec, &s).ok());
  spec.shards = 2;
  spec.tables[0].dim = 8;
  e = Shard::create(spec, &s);
  CHECK(e.message().find("emb.shard-0-of-2.values.npy' has 4 columns, not 8") != std::string::npos);
  spec.tables[0].dim = 4;
  spec.restore = "../ok";
  CHECK(Shard::create(spec, &s).status() == Status::BadRequest);
  spec.restore = "ok";
  spec.checkpoint_dir = dir.path + "/none";
  CHECK(Shard::create(spec, &s).message() == "checkpoint directory '" + dir.path + "/none' is not a directory");

  // A shard without a checkpoint directory: NotEnabled, as NotSupported.
  Rig plain(tables, 2, "");
  CHECK(save_all(*plain.worker, 0, "x", 10) == Status::NotSupported);
}

TEST_CASE("shard-side save: the access list's pull rule decides who may save") {
  TempDir dir;
  TableSpec t = embedding(4, 100);
  t.access.pull = {1000};
  ShardSpec spec{0, 1, {t}, 1u << 16};
  spec.checkpoint_dir = dir.path;
  std::unique_ptr<Shard> s = made_shard(spec);
  Header h;
  h.op = static_cast<std::uint8_t>(Op::Save);
  h.dim = 4;
  h.count = 100;
  std::vector<std::byte> req(sizeof h + 4);
  std::memcpy(req.data(), &h, sizeof h);
  std::memcpy(req.data() + sizeof h, "ckpt", 4);
  std::vector<std::byte> resp(64);
  CHECK(s->handle(req, resp, 2000) == kErrorBytes);
  CHECK(static_cast<PsStatus>(resp[1]) == PsStatus::Forbidden);
  REQUIRE(s->handle(req, resp, 1000) == kAckBytes);  // the one caller it names: an empty table, done at once
  std::uint32_t written = 99;
  std::memcpy(&written, resp.data(), 4);
  CHECK(written == 0);
  CHECK(fs::exists(dir.path + "/ckpt/emb.shard-0-of-1.json"));
  CHECK(s->counters().saves == 1);
}

TEST_CASE("shard-side save: a disk that fills keeps nothing and says IoFailed") {
  TempDir dir;
  const std::vector<TableSpec> tables{embedding(64, 0), dense(10)};
  Rig r(tables, 1, dir.path);
  std::vector<Key> keys(4000);
  for (Key k = 0; k < keys.size(); ++k) keys[k] = k;
  train(*r.worker, keys, 64);
  // Files past 256 KiB fail with EFBIG (a full disk, as the shard sees it); SIGXFSZ ignored.
  struct rlimit old {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto* previous = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 256 << 10;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  const Status st = save_all(*r.worker, 0, "full", 512);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &old) == 0);
  std::signal(SIGXFSZ, previous);
  CHECK(st == Status::BadRequest);
  CHECK(fs::is_empty(dir.path + "/full"));  // neither the parts nor their hidden files stay
  // The disk has room again: the same name saves whole.
  REQUIRE(save_all(*r.worker, 0, "full", 512) == Status::Ok);
  CHECK(fs::exists(dir.path + "/full/emb.shard-0-of-1.json"));
}
