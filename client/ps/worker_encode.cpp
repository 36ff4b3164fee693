// Worker: the operations' entry points and routing keys to their shards
// (coalescing duplicates); splitting into requests and sending them live in
// worker_send.cpp, the operation table and waiting in worker.cpp.
#include <algorithm>
#include <cstring>

#include "client/ps/worker_op.h"

namespace ferry::ps {

namespace {

// Keys of one operation: its rows and index are 32-bit.
constexpr std::size_t kMaxKeys = (std::size_t{1} << 31) - 1;

}  // namespace

// The embedding operations' one entry: the table and the values' size
// checked (state: a table whose optimizer keeps some), then routed.
Result<Ticket> Worker::start_embedding(TableId table, ps::Op wire, bool state, std::span<const Key> keys,
                                       std::span<const float> values) noexcept {
  const TableSpec* t = this->table(table);
  if (t == nullptr || t->kind != TableKind::Embedding ||
      (wire != ps::Op::Pull && values.size() != keys.size() * t->dim) ||
      (state && t->optimizer.kind != OptimizerKind::Adagrad))
    return Result<Ticket>::fail(Status::BadRequest);
  Op* op = nullptr;
  const auto begun = begin(*t, &op);
  if (!begun) return begun;
  op->wire = wire;
  op->opt_state = state;
  return embedding_op(*op, begun.value, keys, values);
}

Result<Ticket> Worker::pull(TableId table, std::span<const Key> keys) noexcept {
  return start_embedding(table, ps::Op::Pull, false, keys, {});
}

Result<Ticket> Worker::push(TableId table, std::span<const Key> keys, std::span<const float> grads) noexcept {
  return start_embedding(table, ps::Op::Push, false, keys, grads);
}

Result<Ticket> Worker::assign(TableId table, std::span<const Key> keys, std::span<const float> values) noexcept {
  return start_embedding(table, ps::Op::Assign, false, keys, values);
}

Result<Ticket> Worker::pull_state(TableId table, std::span<const Key> keys) noexcept {
  return start_embedding(table, ps::Op::Pull, true, keys, {});
}

Result<Ticket> Worker::assign_state(TableId table, std::span<const Key> keys, std::span<const float> values) noexcept {
  return start_embedding(table, ps::Op::Assign, true, keys, values);
}

// The dense operations' one entry, as start_embedding.
Result<Ticket> Worker::start_dense(TableId table, ps::Op wire, bool state, std::span<const float> values) noexcept {
  const TableSpec* t = this->table(table);
  if (t == nullptr || t->kind != TableKind::Dense || (wire != ps::Op::Pull && values.size() != t->rows) ||
      (state && t->optimizer.kind != OptimizerKind::Adagrad))
    return Result<Ticket>::fail(Status::BadRequest);
  Op* op = nullptr;
  const auto begun = begin(*t, &op);
  if (!begun) return begun;
  op->wire = wire;
  op->opt_state = state;
  return dense_op(*op, begun.value, values);
}

Result<Ticket> Worker::pull_dense(TableId table) noexcept { return start_dense(table, ps::Op::Pull, false, {}); }

Result<Ticket> Worker::push_dense(TableId table, std::span<const float> grads) noexcept {
  return start_dense(table, ps::Op::Push, false, grads);
}

Result<Ticket> Worker::assign_dense(TableId table, std::span<const float> values) noexcept {
  return start_dense(table, ps::Op::Assign, false, values);
}

Result<Ticket> Worker::pull_dense_state(TableId table) noexcept { return start_dense(table, ps::Op::Pull, true, {}); }

Result<Ticket> Worker::assign_dense_state(TableId table, std::span<const float> values) noexcept {
  return start_dense(table, ps::Op::Assign, true, values);
}

// A push op for the rows of a completed pull (grads: in its row order; empty: prepared later).
Result<Ticket> Worker::rows_op(Ticket pulled, std::span<const float> grads, Op** out) noexcept {
  const Op* src = find(pulled);
  if (src == nullptr || src->released || src->state != Op::State::Done || src->error.status != Status::Ok ||
      src->wire != ps::Op::Pull || src->table->kind != TableKind::Embedding ||
      (!grads.empty() && grads.size() != std::size_t{src->rows} * src->table->dim))
    return Result<Ticket>::fail(Status::BadRequest);
  const TableSpec& t = *src->table;
  Op* op = nullptr;
  const auto begun = begin(t, &op);
  if (!begun) return begun;
  src = find(pulled);  // begin() may have grown ops_: look the source up again
  op->wire = ps::Op::Push;
  op->rows = src->rows;
  op->shard_rows = src->shard_rows;
  op->keys = src->keys;
  op->values = grads.empty() ? nullptr : grads.data();
  *out = op;
  return begun;
}

Result<Ticket> Worker::push_rows(Ticket pulled, std::span<const float> grads) noexcept {
  const Op* src = find(pulled);
  if (src == nullptr || grads.size() != std::size_t{src->rows} * (src->table ? src->table->dim : 0))
    return Result<Ticket>::fail(Status::BadRequest);
  Op* op = nullptr;
  const auto begun = rows_op(pulled, grads, &op);
  if (!begun) return begun;
  return submit(*op, begun.value);
}

Result<Ticket> Worker::embedding_op(Op& op, Ticket ticket, std::span<const Key> keys,
                                    std::span<const float> values) noexcept {
  const TableSpec& t = *op.table;
  const std::size_t n = keys.size();
  const std::size_t dim = t.dim;
  if (n > kMaxKeys) return abort(op, ticket, Status::BadRequest);
  Scratch& x = *scratch_;
  // 1. Distinct keys, first-seen order; each one's shard.
  x.distinct.reset(n);
  x.first.resize(n);
  x.unique.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Key k = keys[i];
    if (t.rows != 0 && k >= t.rows) return abort(op, ticket, Status::BadRequest);
    bool inserted = false;
    const std::uint32_t u = x.distinct.insert(k, &inserted);
    x.first[i] = u;
    if (inserted) x.unique[u] = k;
  }
  const std::uint32_t distinct = x.distinct.size();
  x.shard.resize(distinct);
  x.row.resize(distinct);
  std::fill(x.fill.begin(), x.fill.end(), 0);
  for (std::uint32_t u = 0; u < distinct; ++u) {
    x.shard[u] = shard_of(t.id, x.unique[u], shards_);
    ++x.fill[x.shard[u]];
  }
  // 2. Rows grouped by shard: shard_rows is the prefix sum of the counts.
  op.shard_rows[0] = 0;
  for (std::uint32_t s = 0; s < shards_; ++s) op.shard_rows[s + 1] = op.shard_rows[s] + x.fill[s];
  for (std::uint32_t s = 0; s < shards_; ++s) x.fill[s] = op.shard_rows[s];
  op.keys.resize(distinct);
  for (std::uint32_t u = 0; u < distinct; ++u) {
    const std::uint32_t r = x.fill[x.shard[u]]++;
    x.row[u] = r;
    op.keys[r] = x.unique[u];
  }
  op.rows = distinct;
  if (op.wire == ps::Op::Pull) {
    op.index.resize(n);
    for (std::size_t i = 0; i < n; ++i) op.index[i] = x.row[x.first[i]];
    return submit(op, ticket);
  }
  // 3. Values in row order: gradients of a duplicate key summed (push), the
  // last value kept (assign).
  op.owned.resize(std::size_t{distinct} * dim);
  x.seen.assign(distinct, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t u = x.first[i];
    float* dst = op.owned.data() + std::size_t{x.row[u]} * dim;
    const float* src = values.data() + i * dim;
    if (!x.seen[u] || op.wire == ps::Op::Assign) {
      std::memcpy(dst, src, 4 * dim);
      x.seen[u] = 1;
    } else {
      for (std::size_t j = 0; j < dim; ++j) dst[j] += src[j];
    }
  }
  op.values = op.owned.data();
  return submit(op, ticket);
}

Result<Ticket> Worker::dense_op(Op& op, Ticket ticket, std::span<const float> values) noexcept {
  const TableSpec& t = *op.table;
  if (t.rows > UINT32_MAX) return abort(op, ticket, Status::BadRequest);  // elements are counted in 32 bits
  op.rows = static_cast<std::uint32_t>(t.rows);
  for (std::uint32_t s = 0; s < shards_; ++s) {
    const DenseSlice slice = dense_slice(t.rows, s, shards_);
    op.shard_rows[s] = static_cast<std::uint32_t>(slice.begin);
    op.shard_rows[s + 1] = static_cast<std::uint32_t>(slice.end);
  }
  op.values = values.empty() ? nullptr : values.data();
  return submit(op, ticket);
}

Result<Ticket> Worker::save(TableId table, std::string_view name, std::span<const std::uint32_t> first,
                            std::uint32_t count) noexcept {
  const TableSpec* t = this->table(table);
  if (t == nullptr || first.size() != shards_ || count == 0 || count > kMaxCount || name.empty() ||
      name.size() > kMaxSaveName)
    return Result<Ticket>::fail(Status::BadRequest);
  Op* op = nullptr;
  const auto begun = begin(*t, &op);
  if (!begun) return begun;
  op->wire = ps::Op::Save;
  try {
    op->save_name.assign(name);
    op->saved.assign(first.begin(), first.end());
  } catch (...) {
    return abort(*op, begun.value, Status::NoMemory);
  }
  op->save_count = count;
  return submit(*op, begun.value);
}

std::span<const std::uint32_t> Worker::saved(Ticket t) const noexcept {
  const Op* op = find(t);
  if (op == nullptr || op->released || op->wire != ps::Op::Save || op->state != Op::State::Done ||
      op->error.status != Status::Ok)
    return {};
  return op->saved;
}

}  // namespace ferry::ps
