#include "ps_workload.h"

#include <algorithm>

namespace ferry::ps::tool {

std::string_view to_string(TransportKind t) noexcept {
  switch (t) {
    case TransportKind::Ferry: return "ferry";
    case TransportKind::Tcp: return "tcp";
  }
  return "unknown";
}

std::vector<TableSpec> workload_tables(const Workload& w, double lr) {
  std::vector<TableSpec> tables;
  TableSpec rows;
  rows.id = kRowsTable;
  rows.name = "rows";
  rows.kind = TableKind::Embedding;
  rows.dim = w.dim;
  rows.rows = w.keys;
  rows.optimizer.kind = OptimizerKind::Sgd;
  rows.optimizer.lr = static_cast<float>(lr);
  rows.init.kind = InitKind::Pattern;
  tables.push_back(rows);
  if (w.dense > 0) {
    TableSpec dense = rows;
    dense.id = kDenseTable;
    dense.name = "dense";
    dense.kind = TableKind::Dense;
    dense.dim = 1;
    dense.rows = std::uint64_t{w.dense} * w.shards;
    tables.push_back(dense);
  }
  return tables;
}

ShardSpec workload_shard(const Workload& w, double lr, std::uint32_t index) {
  ShardSpec s;
  s.index = index;
  s.shards = w.shards;
  s.tables = workload_tables(w, lr);
  s.max_count = std::max(w.batch, w.dense);
  // Every row exists before the measured phase (as the pre-library ferry-ps
  // shard had it): pulls then measure the transport and the lookup, not
  // first touches spread over the run.
  s.preload = true;
  return s;
}

}  // namespace ferry::ps::tool
