// The ferry-ps workload: one embedding table (table 0: --keys rows of --dim
// floats, SGD at --lr, the exact "pattern" init) and, with --dense F, one
// dense table (table 1: F floats per shard), and how each process reaches
// the shards (ferry calls or per-process kernel TCP).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/ps/shard.h"
#include "ferry/ps/table.h"

namespace ferry::ps::tool {

enum class TransportKind : std::uint8_t { Ferry, Tcp };
std::string_view to_string(TransportKind t) noexcept;

inline constexpr TableId kRowsTable = 0;
inline constexpr TableId kDenseTable = 1;

struct Workload {
  std::uint32_t shards = 2;
  std::uint64_t keys = 100000;
  std::uint32_t dim = 64;
  std::uint32_t batch = 512;
  double skew = 0.99;
  std::uint32_t dense = 0;  // dense floats per shard, pulled and pushed every iteration when > 0
  std::uint64_t seed = 1;
};

std::vector<TableSpec> workload_tables(const Workload& w, double lr);
// Shard `index`'s spec: accepts a whole batch in one request.
ShardSpec workload_shard(const Workload& w, double lr, std::uint32_t index);

}  // namespace ferry::ps::tool
