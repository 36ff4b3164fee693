#include "ferry/ps/table.h"

#include <cmath>

namespace ferry::ps {

std::string_view to_string(TableKind k) noexcept {
  switch (k) {
    case TableKind::Embedding: return "embedding";
    case TableKind::Dense: return "dense";
  }
  return "unknown";
}

std::string_view to_string(OptimizerKind k) noexcept {
  switch (k) {
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::Adagrad: return "adagrad";
  }
  return "unknown";
}

std::string_view to_string(InitKind k) noexcept {
  switch (k) {
    case InitKind::Zeros: return "zeros";
    case InitKind::Uniform: return "uniform";
    case InitKind::Pattern: return "pattern";
  }
  return "unknown";
}

float initial_value(const TableSpec& t, Key key, std::uint32_t col) noexcept {
  switch (t.init.kind) {
    case InitKind::Zeros: return 0.0f;
    case InitKind::Uniform: {
      const std::uint64_t h = mix64(t.init.seed ^ mix64(key ^ table_salt(t.id)) ^ (col * 0xD6E8FEB86659FD93ull));
      const float u = static_cast<float>(h >> 40) * 0x1p-24f;  // exact: 24 bits
      return (u * 2.0f - 1.0f) * t.init.scale;
    }
    case InitKind::Pattern:
      return static_cast<float>(static_cast<int>((key * 31 + std::uint64_t{col} * 7) % 17) - 8) * 0.25f;
  }
  return 0.0f;
}

void initial_row(const TableSpec& t, Key key, float* out) noexcept {
  const std::uint32_t dim = t.dim;
  switch (t.init.kind) {
    case InitKind::Zeros:
      for (std::uint32_t j = 0; j < dim; ++j) out[j] = 0.0f;
      return;
    case InitKind::Uniform: {
      const std::uint64_t base = t.init.seed ^ mix64(key ^ table_salt(t.id));
      for (std::uint32_t j = 0; j < dim; ++j) {
        const std::uint64_t h = mix64(base ^ (j * 0xD6E8FEB86659FD93ull));
        out[j] = (static_cast<float>(h >> 40) * 0x1p-24f * 2.0f - 1.0f) * t.init.scale;
      }
      return;
    }
    case InitKind::Pattern: {
      const std::uint64_t base = key * 31;
      for (std::uint32_t j = 0; j < dim; ++j)
        out[j] = static_cast<float>(static_cast<int>((base + std::uint64_t{j} * 7) % 17) - 8) * 0.25f;
      return;
    }
  }
  for (std::uint32_t j = 0; j < dim; ++j) out[j] = 0.0f;
}

Error check_table(const TableSpec& t) {
  const auto bad = [&t](const std::string& why) {
    return Error::bad_request("table " + std::to_string(t.id) + (t.name.empty() ? "" : " '" + t.name + "'") + ": " +
                              why);
  };
  if (t.kind != TableKind::Embedding && t.kind != TableKind::Dense) return bad("unknown kind");
  if (t.kind == TableKind::Embedding && (t.dim == 0 || t.dim > kMaxDim))
    return bad("dim must be in [1, " + std::to_string(kMaxDim) + "]");
  if (t.kind == TableKind::Dense && t.dim != 1) return bad("a dense table has dim 1");
  if (t.kind == TableKind::Dense && (t.rows == 0 || t.rows > UINT32_MAX))
    return bad("a dense table needs a size in [1, 2^32 - 1]");
  if (t.optimizer.kind != OptimizerKind::Sgd && t.optimizer.kind != OptimizerKind::Adagrad)
    return bad("unknown optimizer");
  if (!(std::isfinite(t.optimizer.lr) && t.optimizer.lr > 0)) return bad("lr must be a positive number");
  if (!(std::isfinite(t.optimizer.eps) && t.optimizer.eps >= 0)) return bad("eps must be >= 0");
  if (!(std::isfinite(t.optimizer.initial_accumulator) && t.optimizer.initial_accumulator >= 0))
    return bad("initial_accumulator must be >= 0");
  if (t.init.kind != InitKind::Zeros && t.init.kind != InitKind::Uniform && t.init.kind != InitKind::Pattern)
    return bad("unknown init");
  if (!std::isfinite(t.init.scale)) return bad("init scale must be finite");
  if (t.kind == TableKind::Dense && t.max_rows != 0) return bad("max_rows is for embedding tables");
  if (t.max_rows > UINT32_MAX - 1) return bad("max_rows must be below 2^32");
  return {};
}

Error check_tables(std::span<const TableSpec> tables) {
  std::vector<bool> seen;
  for (const TableSpec& t : tables) {
    if (Error bad = check_table(t); bad.failed()) return bad;
    if (t.id >= seen.size()) seen.resize(std::size_t{t.id} + 1, false);
    if (seen[t.id]) return Error::bad_request("table id " + std::to_string(t.id) + " given twice");
    seen[t.id] = true;
  }
  return {};
}

}  // namespace ferry::ps
