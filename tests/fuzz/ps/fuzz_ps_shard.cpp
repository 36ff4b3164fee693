// libFuzzer target for a parameter-server shard's request handler
// (Shard::handle), which answers whatever any client of its ferryd sends:
// an input is a run of requests (u16 length, then the bytes), each from a
// caller the input's first byte picks, against one shard whose tables
// cover the handler's paths (embedding with Adagrad and a row bound, dense,
// an access list) and that may save into a checkpoint directory.
// Beyond "no crash, no sanitizer report" it checks every answer: an error
// record naming a known status and the request's op, or a success of the
// exact length the request implies; the row bound holds; and what saves
// wrote sits at NAME/FILE inside the checkpoint directory, nowhere deeper.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ferry/ps/shard.h"

using namespace ferry::ps;
namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kMaxCountHere = 256;
constexpr std::uint64_t kMaxRows = 5000;

void check(bool ok) {
  if (!ok) std::abort();
}

struct Rig {
  Rig() {
    char tmpl[] = "/tmp/ferry-fuzz-ps-XXXXXX";
    check(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    TableSpec emb;
    emb.id = 0;
    emb.name = "emb";
    emb.dim = 4;
    emb.optimizer.kind = OptimizerKind::Adagrad;
    emb.init.kind = InitKind::Uniform;
    emb.init.scale = 0.5f;
    emb.max_rows = kMaxRows;
    TableSpec dense;
    dense.id = 1;
    dense.name = "dense";
    dense.kind = TableKind::Dense;
    dense.rows = 64;
    TableSpec locked;
    locked.id = 2;
    locked.name = "locked/../x";  // not a plain file name: its parts are table-2.*
    locked.dim = 2;
    locked.rows = 100;
    locked.access.push = {1000};
    locked.access.pull = {1000, kRemoteCaller};
    ShardSpec spec{0, 2, {emb, dense, locked}, kMaxCountHere};
    spec.checkpoint_dir = dir;
    check(Shard::create(spec, &shard).ok());
    response.resize(shard->max_response_bytes() + 64);
  }
  ~Rig() { fs::remove_all(dir); }
  std::string dir;
  std::unique_ptr<Shard> shard;
  std::vector<std::byte> response;
  std::uint64_t inputs = 0;
};

Rig& rig() {
  static Rig r;
  return r;
}

// Everything under the checkpoint directory is NAME or NAME/FILE, no "." or ".." among them.
void check_tree(const std::string& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const fs::path rel = fs::relative(e.path(), dir);
    check(std::distance(rel.begin(), rel.end()) <= 2);
    for (const auto& part : rel) check(!part.empty() && part.string() != ".." && part.string() != ".");
  }
}

void one(Rig& r, const std::byte* data, std::size_t size, std::uint32_t caller) {
  const std::size_t len = r.shard->handle({data, size}, r.response, caller);
  Header h{};
  if (size >= sizeof h) std::memcpy(&h, data, sizeof h);
  if (len == kErrorBytes) {
    ErrorRecord e;
    std::memcpy(&e, r.response.data(), sizeof e);
    check(e.mark == kErrorMark && e.status >= 1 && e.status <= kMaxPsStatus);
    check(e.op == (size >= sizeof h ? h.op : 0));
    return;
  }
  check(size >= sizeof h && len % 4 == 0 && len <= r.response.size());
  if (h.op == static_cast<std::uint8_t>(Op::Pull)) {
    check(len == 4ull * h.count * h.dim);
  } else {
    check(len == kAckBytes);
    std::uint32_t n;
    std::memcpy(&n, r.response.data(), 4);
    check(n <= h.count);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Rig& r = rig();
  if (size == 0) return 0;
  const std::uint32_t callers[4] = {kUnknownCaller, 1000, kRemoteCaller, 0};
  const std::uint32_t caller = callers[data[0] & 3];
  std::size_t at = 1;
  while (at + 2 <= size) {
    std::size_t n = data[at] | (std::size_t{data[at + 1]} << 8);
    at += 2;
    n = std::min(n, size - at);
    one(r, reinterpret_cast<const std::byte*>(data + at), n, caller);
    at += n;
  }
  check(r.shard->usage()[0].rows <= kMaxRows);
  if (++r.inputs % 512 == 0) {
    check_tree(r.dir);
    for (const auto& e : fs::directory_iterator(r.dir)) fs::remove_all(e.path());  // bounded disk use
  }
  return 0;
}
