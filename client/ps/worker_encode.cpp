// Worker: routing keys to their shards (coalescing duplicates) and encoding
// each shard's request in its own buffer; the operation table and waiting
// live in worker.cpp.
#include <algorithm>
#include <cstring>

#include "client/ps/worker_op.h"

namespace ferry::ps {

namespace {

void write_header(std::byte* at, ps::Op op, const TableSpec& t, std::uint32_t count, std::uint32_t offset,
                  std::uint32_t request_id) noexcept {
  Header h;
  h.op = static_cast<std::uint8_t>(op);
  h.table = t.id;
  h.count = count;
  h.dim = t.dim;
  h.offset = offset;
  h.request_id = request_id;
  std::memcpy(at, &h, sizeof h);
}

}  // namespace

Result<Ticket> Worker::pull(TableId table, std::span<const Key> keys) noexcept {
  const TableSpec* t = this->table(table);
  if (t == nullptr || t->kind != TableKind::Embedding) return Result<Ticket>::fail(Status::BadRequest);
  Op* op = nullptr;
  const auto begun = begin(*t, &op);
  if (!begun) return begun;
  op->wire = ps::Op::Pull;
  return embedding_op(*op, begun.value, keys, {});
}

Result<Ticket> Worker::push(TableId table, std::span<const Key> keys, std::span<const float> grads) noexcept {
  const TableSpec* t = this->table(table);
  if (t == nullptr || t->kind != TableKind::Embedding || grads.size() != keys.size() * t->dim)
    return Result<Ticket>::fail(Status::BadRequest);
  Op* op = nullptr;
  const auto begun = begin(*t, &op);
  if (!begun) return begun;
  op->wire = ps::Op::Push;
  return embedding_op(*op, begun.value, keys, grads);
}

Result<Ticket> Worker::assign(TableId table, std::span<const Key> keys, std::span<const float> values) noexcept {
  const TableSpec* t = this->table(table);
  if (t == nullptr || t->kind != TableKind::Embedding || values.size() != keys.size() * t->dim)
    return Result<Ticket>::fail(Status::BadRequest);
  Op* op = nullptr;
  const auto begun = begin(*t, &op);
  if (!begun) return begun;
  op->wire = ps::Op::Assign;
  return embedding_op(*op, begun.value, keys, values);
}

Result<Ticket> Worker::pull_dense(TableId table) noexcept {
  const TableSpec* t = this->table(table);
  if (t == nullptr || t->kind != TableKind::Dense) return Result<Ticket>::fail(Status::BadRequest);
  Op* op = nullptr;
  const auto begun = begin(*t, &op);
  if (!begun) return begun;
  op->wire = ps::Op::Pull;
  return dense_op(*op, begun.value, {});
}

Result<Ticket> Worker::push_dense(TableId table, std::span<const float> grads) noexcept {
  const TableSpec* t = this->table(table);
  if (t == nullptr || t->kind != TableKind::Dense || grads.size() != t->rows)
    return Result<Ticket>::fail(Status::BadRequest);
  Op* op = nullptr;
  const auto begun = begin(*t, &op);
  if (!begun) return begun;
  op->wire = ps::Op::Push;
  return dense_op(*op, begun.value, grads);
}

Result<Ticket> Worker::assign_dense(TableId table, std::span<const float> values) noexcept {
  const TableSpec* t = this->table(table);
  if (t == nullptr || t->kind != TableKind::Dense || values.size() != t->rows)
    return Result<Ticket>::fail(Status::BadRequest);
  Op* op = nullptr;
  const auto begun = begin(*t, &op);
  if (!begun) return begun;
  op->wire = ps::Op::Assign;
  return dense_op(*op, begun.value, values);
}

Result<Ticket> Worker::push_rows(Ticket pulled, std::span<const float> grads) noexcept {
  const Op* src = find(pulled);
  if (src == nullptr || src->released || src->state != Op::State::Done || src->error.status != Status::Ok ||
      src->wire != ps::Op::Pull || src->table->kind != TableKind::Embedding ||
      grads.size() != std::size_t{src->rows} * src->table->dim)
    return Result<Ticket>::fail(Status::BadRequest);
  const TableSpec& t = *src->table;
  Op* op = nullptr;
  const auto begun = begin(t, &op);
  if (!begun) return begun;
  src = find(pulled);  // begin() may have grown ops_: look the source up again
  op->wire = ps::Op::Push;
  op->rows = src->rows;
  op->shard_rows = src->shard_rows;
  op->block = link_->alloc(kAckBytes * shards_);
  if (!op->block) return abort(*op, begun.value, Status::NoMemory);
  const std::size_t dim = t.dim;
  for (std::uint32_t s = 0; s < shards_; ++s) {
    const std::uint32_t first = src->shard_rows[s], count = src->shard_rows[s + 1] - first;
    if (count == 0) continue;
    const std::size_t len = request_bytes(ps::Op::Push, TableKind::Embedding, count, dim);
    if (len > link_->max_message_bytes()) return abort(*op, begun.value, Status::ResponseTooLarge);
    Buffer b = link_->alloc(len);
    if (!b) return abort(*op, begun.value, Status::NoMemory);
    op->requests[s] = b;
    op->request_len[s] = static_cast<std::uint32_t>(len);
    write_header(b.data, ps::Op::Push, t, count, 0, next_request_id_++);
    std::memcpy(b.data + kHeaderBytes, src->keys.data() + first, 8 * std::size_t{count});
    std::memcpy(b.data + kHeaderBytes + 8 * std::size_t{count}, grads.data() + first * dim, 4 * count * dim);
  }
  return submit(*op, begun.value);
}

Result<Ticket> Worker::embedding_op(Op& op, Ticket ticket, std::span<const Key> keys,
                                    std::span<const float> values) noexcept {
  const TableSpec& t = *op.table;
  const std::size_t n = keys.size();
  const std::size_t dim = t.dim;
  if (n > kMaxCount) return abort(op, ticket, Status::BadRequest);
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
  const bool pull = op.wire == ps::Op::Pull;
  if (pull) {
    op.index.resize(n);
    for (std::size_t i = 0; i < n; ++i) op.index[i] = x.row[x.first[i]];
    const std::size_t bytes = 4 * std::size_t{distinct} * dim;
    if (bytes > link_->max_message_bytes()) return abort(op, ticket, Status::ResponseTooLarge);
    op.block = link_->alloc(std::max<std::size_t>(bytes, kAckBytes));
  } else {
    op.block = link_->alloc(kAckBytes * shards_);
  }
  if (!op.block) return abort(op, ticket, Status::NoMemory);
  // 3. One request per shard that owns any key.
  for (std::uint32_t s = 0; s < shards_; ++s) {
    const std::uint32_t first = op.shard_rows[s], count = op.shard_rows[s + 1] - first;
    if (count == 0) continue;
    const std::size_t len = request_bytes(op.wire, TableKind::Embedding, count, dim);
    if (len > link_->max_message_bytes()) return abort(op, ticket, Status::ResponseTooLarge);
    Buffer b = link_->alloc(len);
    if (!b) return abort(op, ticket, Status::NoMemory);
    op.requests[s] = b;
    op.request_len[s] = static_cast<std::uint32_t>(len);
    write_header(b.data, op.wire, t, count, 0, next_request_id_++);
    std::memcpy(b.data + kHeaderBytes, op.keys.data() + first, 8 * std::size_t{count});
  }
  if (!pull) {
    // 4. Values into each shard's request at its key's place: gradients of
    // a duplicate key summed (push), the last value kept (assign).
    x.seen.assign(distinct, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t u = x.first[i];
      const std::uint32_t s = x.shard[u];
      const std::uint32_t first = op.shard_rows[s], count = op.shard_rows[s + 1] - first;
      float* dst = reinterpret_cast<float*>(op.requests[s].data + kHeaderBytes + 8 * std::size_t{count}) +
                   (x.row[u] - first) * dim;
      const float* src = values.data() + i * dim;
      if (!x.seen[u] || op.wire == ps::Op::Assign) {
        std::memcpy(dst, src, 4 * dim);
        x.seen[u] = 1;
      } else {
        for (std::size_t j = 0; j < dim; ++j) dst[j] += src[j];
      }
    }
  }
  return submit(op, ticket);
}

Result<Ticket> Worker::dense_op(Op& op, Ticket ticket, std::span<const float> values) noexcept {
  const TableSpec& t = *op.table;
  const bool pull = op.wire == ps::Op::Pull;
  const std::size_t bytes = 4 * t.rows;
  if (pull && bytes > link_->max_message_bytes()) return abort(op, ticket, Status::ResponseTooLarge);
  op.block = link_->alloc(pull ? bytes : kAckBytes * shards_);
  if (!op.block) return abort(op, ticket, Status::NoMemory);
  op.rows = static_cast<std::uint32_t>(t.rows);
  for (std::uint32_t s = 0; s < shards_; ++s) {
    const DenseSlice slice = dense_slice(t.rows, s, shards_);
    op.shard_rows[s] = static_cast<std::uint32_t>(slice.begin);
    op.shard_rows[s + 1] = static_cast<std::uint32_t>(slice.end);
  }
  for (std::uint32_t s = 0; s < shards_; ++s) {
    const std::uint32_t first = op.shard_rows[s], count = op.shard_rows[s + 1] - first;
    if (count == 0) continue;
    const std::size_t len = request_bytes(op.wire, TableKind::Dense, count, 1);
    if (len > link_->max_message_bytes()) return abort(op, ticket, Status::ResponseTooLarge);
    Buffer b = link_->alloc(len);
    if (!b) return abort(op, ticket, Status::NoMemory);
    op.requests[s] = b;
    op.request_len[s] = static_cast<std::uint32_t>(len);
    write_header(b.data, op.wire, t, count, first, next_request_id_++);
    if (!pull) std::memcpy(b.data + kHeaderBytes, values.data() + first, 4 * std::size_t{count});
  }
  return submit(op, ticket);
}

}  // namespace ferry::ps
