// Parameter-server tables: what a table is (an embedding table of rows
// addressed by 64-bit keys, or a dense flat tensor), how it is initialised,
// which optimizer its shards apply to pushed gradients, and where each key
// or element lives. Workers and shards must be given the same specs; the
// wire carries the table id and dim, and a shard refuses a mismatch.
//
// Placement (documented, stable: checkpoints and external tools rely on it):
//   embedding key k of table t  -> shard ((mix64(k ^ salt(t)) >> 32) * M) >> 32
//   dense element e of table t  -> shard e / ceil(size / M)   (contiguous slices)
// with M shards, salt(t) = 0x9E3779B97F4A7C15 * (t + 1) and mix64 the
// splitmix64 finalizer below. The multiply-shift maps the hash's high 32
// bits onto [0, M) without a division; shards index their rows with the
// low bits, so the two choices stay independent.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/error.h"
#include "ferry/visibility.h"

namespace ferry::ps {

using Key = std::uint64_t;
using TableId = std::uint16_t;

enum class TableKind : std::uint8_t { Embedding = 0, Dense = 1 };
enum class OptimizerKind : std::uint8_t { Sgd = 0, Adagrad = 1 };
enum class InitKind : std::uint8_t {
  Zeros = 0,
  Uniform = 1,  // uniform in [-scale, scale), a pure function of (seed, key, column)
  Pattern = 2,  // multiples of 1/4 in [-2, 2]: exact float sums (ferry-ps check)
};
FERRY_API std::string_view to_string(TableKind k) noexcept;
FERRY_API std::string_view to_string(OptimizerKind k) noexcept;
FERRY_API std::string_view to_string(InitKind k) noexcept;

// Applied by the shard to every pushed gradient g of a parameter w:
//   Sgd:     w = fma(-lr, g, w)
//   Adagrad: a = fma(g, g, a);  w = w + (-lr * g) / (sqrt(a) + eps)   (a starts at initial_accumulator)
// in float32: torch.optim.SGD (no momentum, no weight decay) and
// torch.optim.Adagrad (no lr decay, no weight decay) as torch's CPU kernels
// compute them where they fuse multiply-adds (its AVX2 / AVX-512 builds),
// bit for bit.
struct Optimizer {
  OptimizerKind kind = OptimizerKind::Sgd;
  float lr = 0.01f;
  float eps = 1e-10f;
  float initial_accumulator = 0.0f;
};

struct Init {
  InitKind kind = InitKind::Zeros;
  float scale = 0.0f;
  std::uint64_t seed = 0;
};

// Who a table's shards answer, by the caller's uid as the shard's ferryd
// saw it (SO_PEERCRED at attach). kRemoteCaller names every caller that
// came through a peer daemon (its uid is another host's to know);
// kUnknownCaller one nobody vouched for (a framed-TCP link, a ferryd that
// predates caller ids), which no list should name. Shard-side only: workers
// ignore it. The checks and their limits: docs/security.md.
inline constexpr std::uint32_t kRemoteCaller = 0xFFFFFFFFu;
inline constexpr std::uint32_t kUnknownCaller = 0xFFFFFFFEu;
struct TableAccess {
  // Who may pull / push / assign; empty: anyone.
  std::vector<std::uint32_t> pull, push, assign;
};

struct TableSpec {
  TableId id = 0;
  std::string name;  // for messages and the Python API; not on the wire
  TableKind kind = TableKind::Embedding;
  std::uint32_t dim = 1;   // embedding: floats per row (1..kMaxDim); dense: 1
  std::uint64_t rows = 0;  // embedding: keys in [0, rows), 0 = any 64-bit key; dense: its size in floats
  Optimizer optimizer;
  Init init;
  // Embedding, shard-side: the most rows one shard holds of this table
  // (0: no limit but `rows`). A row exists once a push or assign touched
  // its key (a pull of any other key answers its initial values and keeps
  // nothing); a request that would create rows past the limit is refused
  // TableFull, whole, and changes nothing.
  std::uint64_t max_rows = 0;
  TableAccess access;
};

inline constexpr std::uint32_t kMaxDim = 4096;
inline constexpr std::uint32_t kMaxShards = 256;

// splitmix64's finalizer: a bijection on 64 bits with full avalanche.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

constexpr std::uint64_t table_salt(TableId t) noexcept { return 0x9E3779B97F4A7C15ull * (std::uint64_t{t} + 1); }

// The shard that owns embedding key `key` of table `t` among `shards`.
constexpr std::uint32_t shard_of(TableId t, Key key, std::uint32_t shards) noexcept {
  return static_cast<std::uint32_t>(((mix64(key ^ table_salt(t)) >> 32) * shards) >> 32);
}

// The elements [begin, end) of a dense table that `shard` holds.
struct DenseSlice {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t size() const noexcept { return end - begin; }
};
constexpr DenseSlice dense_slice(std::uint64_t size, std::uint32_t shard, std::uint32_t shards) noexcept {
  const std::uint64_t chunk = (size + shards - 1) / shards;
  const std::uint64_t begin = std::uint64_t{shard} * chunk < size ? std::uint64_t{shard} * chunk : size;
  const std::uint64_t end = begin + chunk < size ? begin + chunk : size;
  return {begin, end};
}

// Initial value of column `col` of embedding row `key` (dense: element
// `key`, column 0). Shards call it on a row's first touch; the Python
// package calls the same function to build reference models.
//   Uniform: h = mix64(seed ^ mix64(key ^ table_salt(t)) ^ (col * 0xD6E8FEB86659FD93));
//            value = ((h >> 40) * 2^-24 * 2 - 1) * scale
//   Pattern: ((key * 31 + col * 7) % 17 - 8) / 4
FERRY_API float initial_value(const TableSpec& t, Key key, std::uint32_t col) noexcept;
// The whole row at once (out[col] = initial_value(t, key, col) for col < t.dim),
// the init kind decided once per row rather than per element: a shard's first
// touch of a row.
FERRY_API void initial_row(const TableSpec& t, Key key, float* out) noexcept;

// Whether a spec can be used: BadRequest, with the reason, when it cannot.
// Configuration time only.
[[nodiscard]] FERRY_API Error check_table(const TableSpec& t);
// check_table of each, and no table id given twice.
[[nodiscard]] FERRY_API Error check_tables(std::span<const TableSpec> tables);

}  // namespace ferry::ps
