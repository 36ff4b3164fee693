// Save steps in the background (Shard::begin_save, what ShardServer uses;
// suite 'unit'): while a step's files block (a FIFO where its keys file
// goes blocks the writer thread in open() until the test reads it) the
// shard answers pulls and pushes; the step's answer comes once, after; a
// step's rows are copied a piece at a time, each piece as it was when
// copied, whatever is pushed before or after; background steps write the
// same files as handle()'s; a second Save step waits (Wait) for the
// first, or, given to handle(), is written after it; and a writer stuck in
// a system call holds up neither the shard nor its exit, and past
// save_stall_ms fails its step and has later ones refused until it returns.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "client/ps/save_writer.h"
#include "ferry/ps/shard.h"
#include "tests/ps/made.h"
#include "tests/ps/temp_dir.h"

using namespace ferry;
using namespace ferry::ps;
using namespace ferry::ps::test;
namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kDim = 4;

TableSpec table(std::uint64_t rows = 1000) {
  TableSpec t;
  t.id = 0;
  t.name = "emb";
  t.dim = kDim;
  t.rows = rows;
  t.optimizer.kind = OptimizerKind::Adagrad;
  t.optimizer.lr = 0.1f;
  t.optimizer.initial_accumulator = 0.1f;
  t.init.kind = InitKind::Uniform;
  t.init.scale = 0.5f;
  t.init.seed = 3;
  return t;
}

std::vector<std::byte> request(Op op, std::uint32_t count, std::uint32_t offset, const std::vector<Key>& keys,
                               const std::vector<float>& values, const std::string& name = "") {
  Header h;
  h.op = static_cast<std::uint8_t>(op);
  h.count = count;
  h.dim = kDim;
  h.offset = offset;
  std::vector<std::byte> r(kHeaderBytes + 8 * keys.size() + 4 * values.size() + name.size());
  std::memcpy(r.data(), &h, kHeaderBytes);
  std::memcpy(r.data() + kHeaderBytes, keys.data(), 8 * keys.size());
  std::memcpy(r.data() + kHeaderBytes + 8 * keys.size(), values.data(), 4 * values.size());
  std::memcpy(r.data() + kHeaderBytes + 8 * keys.size() + 4 * values.size(), name.data(), name.size());
  return r;
}

std::vector<std::byte> save_step(const std::string& name, std::uint32_t first, std::uint32_t count) {
  return request(Op::Save, count, first, {}, {}, name);
}

// Pushes gradient `g` to every one of `keys`; the shard's answer must be an ack.
void push(Shard& shard, const std::vector<Key>& keys, float g) {
  const std::vector<float> grads(keys.size() * kDim, g);
  std::vector<std::byte> out(64);
  const auto req = request(Op::Push, static_cast<std::uint32_t>(keys.size()), 0, keys, grads);
  REQUIRE(shard.handle(req, out) == kAckBytes);
}

std::vector<float> pull(Shard& shard, const std::vector<Key>& keys) {
  std::vector<std::byte> out(keys.size() * kDim * 4);
  const auto req = request(Op::Pull, static_cast<std::uint32_t>(keys.size()), 0, keys, {});
  REQUIRE(shard.handle(req, out) == out.size());
  std::vector<float> rows(keys.size() * kDim);
  std::memcpy(rows.data(), out.data(), out.size());
  return rows;
}

// Serves the step in the background as ShardServer does (save_turn()
// whenever the event fd says the writer wants a piece, 10 s at most for
// each), until it ends; then its answer.
std::vector<std::byte> finished(Shard& shard) {
  pollfd p{shard.save_event_fd(), POLLIN, 0};
  REQUIRE(p.fd >= 0);
  while (!shard.save_ready()) {
    REQUIRE(::poll(&p, 1, 10000) == 1);
    shard.save_turn();
  }
  std::vector<std::byte> out(16);
  out.resize(shard.end_save(out));
  REQUIRE_FALSE(shard.save_running());
  return out;
}

std::uint32_t written(const std::vector<std::byte>& answer) {
  REQUIRE(answer.size() == kAckBytes);
  std::uint32_t n = 0;
  std::memcpy(&n, answer.data(), 4);
  return n;
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  return std::string(std::istreambuf_iterator<char>(f), {});
}

ShardSpec saving_spec(const TempDir& dir, std::uint32_t save_stall_ms = 60000) {
  ShardSpec spec{0, 1, {table()}, 4096};
  spec.checkpoint_dir = dir.path;
  spec.save_stall_ms = save_stall_ms;
  return spec;
}

// Checkpoint NAME's keys file is a FIFO: the writer's open() of it waits
// until someone opens it for reading (unblock()). Its path.
std::string blocking_keys_file(const TempDir& dir, const std::string& name) {
  REQUIRE(fs::create_directory(dir.path + "/" + name));
  std::string fifo = dir.path + "/" + name + "/.emb.shard-0-of-1.keys.npy.tmp";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  return fifo;
}

// Reads that FIFO, so that the writer's open() returns.
void unblock(const std::string& fifo) {
  const int fd = ::open(fifo.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  char sink[4096];
  while (::read(fd, sink, sizeof sink) > 0) {
  }
  ::close(fd);
}

std::vector<Key> keys_upto(Key n) {
  std::vector<Key> k(n);
  for (Key i = 0; i < n; ++i) k[i] = i;
  return k;
}

}  // namespace

TEST_CASE("background save: the shard serves while a step's files block, and the step is answered once, after") {
  TempDir dir;
  const ShardSpec spec = saving_spec(dir);
  auto shard = made_shard(spec);
  const auto keys = keys_upto(100);
  push(*shard, keys, 0.5f);
  // The keys file of checkpoint "blocked" is a FIFO: the writer thread's
  // open() waits there until this test opens it for reading.
  const std::string fifo = blocking_keys_file(dir, "blocked");

  REQUIRE(shard->begin_save(save_step("blocked", 0, 1000)) == Shard::SaveStart::Began);
  REQUIRE(shard->save_running());
  // Another Save step waits for it; everything else is answered now.
  CHECK(shard->begin_save(save_step("other", 0, 1000)) == Shard::SaveStart::Wait);
  CHECK(shard->begin_save(request(Op::Pull, 1, 0, {7}, {})) == Shard::SaveStart::Handle);
  const auto before = pull(*shard, keys);
  push(*shard, keys, -1.0f);
  CHECK(pull(*shard, keys) != before);
  CHECK_FALSE(shard->save_ready());

  // Let the writer go: it writes into the FIFO, which cannot be synced, so the step fails IoFailed.
  unblock(fifo);
  const auto answer = finished(*shard);
  REQUIRE(answer.size() == kErrorBytes);
  CHECK(static_cast<PsStatus>(std::to_integer<std::uint8_t>(answer[1])) == PsStatus::IoFailed);
  CHECK_FALSE(fs::exists(fifo));  // nothing of the failed save is kept
  CHECK(fs::is_empty(dir.path + "/blocked"));
  CHECK(shard->counters().requests == 5);  // 2 pushes, 2 pulls, the save (begin_save counts only what it began)
  CHECK(shard->counters().rejected == 1);
  CHECK(shard->counters().saves == 0);
  CHECK(shard->counters().save_failed == 1);
}

TEST_CASE("background save: a step holds its rows as they were when it began; the files are handle()'s") {
  TempDir dir;
  const ShardSpec spec = saving_spec(dir);
  auto shard = made_shard(spec);
  const auto keys = keys_upto(300);
  push(*shard, keys, 0.25f);

  // "sync": handle() writes each step on this thread, nothing pushed between.
  for (std::uint32_t first = 0;; first += 128) {
    std::vector<std::byte> out(16);
    out.resize(shard->handle(save_step("sync", first, 128), out));
    if (written(out) < 128) break;
  }
  // "bg": the same rows in background steps, each step's rows pushed right after it began.
  std::uint32_t first = 0;
  for (;;) {
    REQUIRE(shard->begin_save(save_step("bg", first, 128)) == Shard::SaveStart::Began);
    std::vector<Key> step_keys;
    for (Key k = first; k < std::min<Key>(first + 128, 300); ++k) step_keys.push_back(k);
    if (!step_keys.empty()) push(*shard, step_keys, 3.0f);  // after the copy: not in the files
    const std::uint32_t n = written(finished(*shard));
    first += n;
    if (n < 128) break;
  }
  CHECK(first == 300);
  CHECK(shard->counters().saves == 6);
  for (const char* ext : {".keys.npy", ".values.npy", ".state.npy", ".json"}) {
    INFO(ext);
    CHECK(file_bytes(dir.path + "/bg/emb.shard-0-of-1" + ext) == file_bytes(dir.path + "/sync/emb.shard-0-of-1" + ext));
  }

  // Restored, the shard holds the rows as they were before the pushes that followed each step.
  ShardSpec again = spec;
  again.restore = "bg";
  auto restored = made_shard(again);
  ShardSpec from_sync = spec;
  from_sync.restore = "sync";
  auto reference = made_shard(from_sync);
  CHECK(pull(*restored, keys) == pull(*reference, keys));
  CHECK(pull(*restored, keys) != pull(*shard, keys));
}

TEST_CASE("background save: a step of many pieces holds each piece's rows as they were when it was copied") {
  TempDir dir;
  ShardSpec spec{0, 1, {table(100000)}, 1u << 17};
  spec.checkpoint_dir = dir.path;
  auto shard = made_shard(spec);
  // Three pieces (keys, values and Adagrad state a row): begin_save()
  // copies the first two, and the third only once the writer has written
  // the first, which the test lets happen after its push.
  const std::uint64_t per_piece = detail::piece_rows(8 + 2 * 4 * kDim);
  const Key n = 3 * per_piece - 100;
  const auto keys = keys_upto(n);
  push(*shard, keys, 0.25f);  // the rows, created in key order
  const auto before = pull(*shard, keys);
  REQUIRE(shard->begin_save(save_step("pieces", 0, 1u << 20)) == Shard::SaveStart::Began);
  push(*shard, keys, 1.0f);
  const auto after = pull(*shard, keys);
  REQUIRE(before != after);
  CHECK(written(finished(*shard)) == n);  // fewer than asked: the part is complete

  ShardSpec again = spec;
  again.restore = "pieces";
  auto restored = made_shard(again);
  const auto saved = pull(*restored, keys);
  const std::size_t split = 2 * per_piece * kDim;
  CHECK(std::equal(saved.begin(), saved.begin() + split, before.begin()));
  CHECK(std::equal(saved.begin() + split, saved.end(), after.begin() + split));
}

TEST_CASE("background save: handle() given a Save step lets the one in the background finish first") {
  TempDir dir;
  const ShardSpec spec = saving_spec(dir);
  auto shard = made_shard(spec);
  push(*shard, keys_upto(50), 1.0f);
  REQUIRE(shard->begin_save(save_step("first", 0, 1000)) == Shard::SaveStart::Began);
  std::vector<std::byte> out(16);
  out.resize(shard->handle(save_step("second", 0, 1000), out));
  CHECK(written(out) == 50);
  CHECK(fs::exists(dir.path + "/second/emb.shard-0-of-1.json"));
  // The background step's answer is still there for end_save().
  REQUIRE(shard->save_ready());
  CHECK(written(finished(*shard)) == 50);
  CHECK(fs::exists(dir.path + "/first/emb.shard-0-of-1.json"));
  // A step refused is left to handle(), which says why; a name used already is refused by the writer.
  CHECK(shard->begin_save(save_step(".hidden", 0, 1000)) == Shard::SaveStart::Handle);
  REQUIRE(shard->begin_save(save_step("first", 0, 1000)) == Shard::SaveStart::Began);
  const auto again = finished(*shard);
  REQUIRE(again.size() == kErrorBytes);
  CHECK(static_cast<PsStatus>(std::to_integer<std::uint8_t>(again[1])) == PsStatus::Exists);
}

TEST_CASE("background save: a writer stuck on its disk holds up neither the shard nor its exit") {
  TempDir dir;
  auto shard = made_shard(saving_spec(dir));
  push(*shard, keys_upto(100), 0.5f);
  const std::string fifo = blocking_keys_file(dir, "stuck");
  REQUIRE(shard->begin_save(save_step("stuck", 0, 1000)) == Shard::SaveStart::Began);

  // The writer sits in open() of the FIFO: drop_save() gives up on it after
  // its patience, and the shard saves again with a new writer.
  shard->drop_save();
  CHECK_FALSE(shard->save_running());
  REQUIRE(shard->begin_save(save_step("after", 0, 1000)) == Shard::SaveStart::Began);
  CHECK(written(finished(*shard)) == 100);
  CHECK(fs::exists(dir.path + "/after/emb.shard-0-of-1.json"));
  shard.reset();

  // Once its open() returns, the stuck writer finds its step cancelled and
  // removes what it wrote.
  unblock(fifo);
  for (int i = 0; i < 1000 && !fs::is_empty(dir.path + "/stuck"); ++i) ::usleep(10000);
  CHECK(fs::is_empty(dir.path + "/stuck"));
}

namespace {

// Turns the step in the background as ShardServer does, without waking on
// the writer (a stalled one never signals), until it is ready: its answer.
std::vector<std::byte> answered_after_stall(Shard& shard) {
  for (int i = 0; i < 1000 && !shard.save_ready(); ++i) {
    ::usleep(10000);
    shard.save_turn();
  }
  REQUIRE(shard.save_ready());
  std::vector<std::byte> out(16);
  out.resize(shard.end_save(out));
  return out;
}

PsStatus status_of(const std::vector<std::byte>& answer) {
  REQUIRE(answer.size() == kErrorBytes);
  return static_cast<PsStatus>(std::to_integer<std::uint8_t>(answer[1]));
}

}  // namespace

TEST_CASE("background save: a writer stuck past save_stall_ms fails its step, and saves are refused until it returns") {
  TempDir dir;
  auto shard = made_shard(saving_spec(dir, 200));
  push(*shard, keys_upto(100), 0.5f);
  const std::string fifo = blocking_keys_file(dir, "stuck");

  const auto began = std::chrono::steady_clock::now();
  REQUIRE(shard->begin_save(save_step("stuck", 0, 1000)) == Shard::SaveStart::Began);
  CHECK(status_of(answered_after_stall(*shard)) == PsStatus::IoFailed);
  CHECK(std::chrono::steady_clock::now() - began >= std::chrono::milliseconds(200));
  CHECK_FALSE(shard->save_running());

  // While that writer sits in open(), a Save step is refused at once (no
  // second thread joins it there), in the background or not; the rest is served.
  CHECK(shard->begin_save(save_step("next", 0, 1000)) == Shard::SaveStart::Handle);
  std::vector<std::byte> out(16);
  out.resize(shard->handle(save_step("next", 0, 1000), out));
  CHECK(status_of(out) == PsStatus::IoFailed);
  CHECK_FALSE(fs::exists(dir.path + "/next"));
  CHECK(pull(*shard, keys_upto(3)).size() == 3 * kDim);

  // Its open() returns: it removes what it wrote, and saves work again.
  unblock(fifo);
  bool cleaned = false;
  for (int i = 0; i < 1000 && !cleaned; ++i) {
    cleaned = fs::is_empty(dir.path + "/stuck");
    if (!cleaned) ::usleep(10000);
  }
  CHECK(cleaned);
  REQUIRE(shard->begin_save(save_step("after", 0, 1000)) == Shard::SaveStart::Began);
  CHECK(written(finished(*shard)) == 100);
  CHECK(fs::exists(dir.path + "/after/emb.shard-0-of-1.json"));
  CHECK(shard->counters().saves == 1);
  CHECK(shard->counters().save_failed == 2);  // the stalled step and "next" (begin_save() answers nothing)
}

TEST_CASE("background save: handle() given a Save step behind a stalled writer answers both IoFailed") {
  TempDir dir;
  auto shard = made_shard(saving_spec(dir, 200));
  push(*shard, keys_upto(10), 0.5f);
  const std::string fifo = blocking_keys_file(dir, "stuck");
  REQUIRE(shard->begin_save(save_step("stuck", 0, 1000)) == Shard::SaveStart::Began);

  // handle() waits for the step in the background, which never ends: after
  // the stall limit it gives it up and refuses its own step.
  std::vector<std::byte> out(16);
  out.resize(shard->handle(save_step("second", 0, 1000), out));
  CHECK(status_of(out) == PsStatus::IoFailed);
  REQUIRE(shard->save_ready());  // the background step's answer, for its caller
  std::vector<std::byte> first(16);
  first.resize(shard->end_save(first));
  CHECK(status_of(first) == PsStatus::IoFailed);
  CHECK(shard->counters().save_failed == 2);
  unblock(fifo);
}
