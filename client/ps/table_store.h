// One table's part on one shard: embedding rows (created by the first push
// or assign of their key from the table's init function, at most
// spec.max_rows of them; a pull of a key without a row answers its initial
// values and creates nothing), found through a direct key -> row array
// when the table's key range is small enough, else through a KeyIndex) or a dense
// slice, plus the optimizer state (Adagrad accumulators), and the three
// operations the wire carries. Callers (Shard::handle) have validated the
// request's header and length; the store validates keys and ranges itself
// and reports a bad one before it changes anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "client/ps/key_index.h"
#include "ferry/ps/table.h"
#include "ferry/ps/wire.h"

namespace ferry::ps::detail {

class TableStore {
 public:
  // preload: create every row this shard owns now (bounded embedding tables).
  TableStore(const TableSpec& spec, std::uint32_t shard, std::uint32_t shards, std::uint32_t max_count,
             bool preload = false);

  const TableSpec& spec() const noexcept { return spec_; }
  DenseSlice slice() const noexcept { return slice_; }
  std::uint32_t shard() const noexcept { return shard_; }
  std::uint32_t shards() const noexcept { return shards_; }
  std::uint64_t rows_held() const noexcept { return stamp_.size(); }
  // Heap bytes this table holds on the shard: rows, optimizer state, index.
  std::uint64_t bytes_held() const noexcept;

  // keys: `count` unaligned u64; out: count * dim floats.
  PsStatus pull(const std::byte* keys, std::uint32_t count, float* out) noexcept;
  // values: count * dim floats (unaligned). *applied: distinct keys updated.
  PsStatus push(const std::byte* keys, std::uint32_t count, const std::byte* grads, std::uint32_t* applied) noexcept;
  PsStatus assign(const std::byte* keys, std::uint32_t count, const std::byte* values, std::uint32_t* applied) noexcept;
  // The optimizer state of rows (kFlagState): whether there is any (Adagrad),
  // and pull/assign of it as of the values (a pull of a key without a row
  // answers the initial state; an assign creates the row, values from init).
  // A negative state (Adagrad's is a sum of squares) is BadField.
  bool has_state() const noexcept { return spec_.optimizer.kind == OptimizerKind::Adagrad; }
  PsStatus pull_state(const std::byte* keys, std::uint32_t count, float* out) noexcept;
  PsStatus assign_state(const std::byte* keys, std::uint32_t count, const std::byte* values,
                        std::uint32_t* applied) noexcept;
  // Dense: elements [offset, offset + count) of the whole table; with
  // `state`, their optimizer state instead of their values (has_state()).
  PsStatus pull_dense(std::uint32_t offset, std::uint32_t count, float* out, bool state = false) const noexcept;
  PsStatus push_dense(std::uint32_t offset, std::uint32_t count, const std::byte* grads) noexcept;
  PsStatus assign_dense(std::uint32_t offset, std::uint32_t count, const std::byte* values,
                        bool state = false) noexcept;

  // A row's current values, or nullptr when it was never touched (tests, checkpoints).
  const float* find_row(Key key) const noexcept;

  // Shard-side checkpoints (table_save.cpp): the rows this shard holds, in
  // the order they were created (dense: the slice's elements, one per row),
  // each row's key (embedding; null for dense, whose rows are the slice's
  // elements), values and optimizer state (null without), and a restored
  // row put back (BadKey for a key this shard does not own, TableFull past
  // max_rows). Rows lie side by side from the pointers.
  std::uint64_t saved_rows() const noexcept {
    return spec_.kind == TableKind::Dense ? slice_.size() : row_keys_.size();
  }
  const Key* row_keys(std::uint64_t r) const noexcept {
    return spec_.kind == TableKind::Dense ? nullptr : row_keys_.data() + r;
  }
  const float* row_values(std::uint64_t r) const noexcept { return &values_[r * spec_.dim]; }
  const float* row_state(std::uint64_t r) const noexcept { return accum_.empty() ? nullptr : &accum_[r * spec_.dim]; }
  PsStatus restore_row(Key key, const float* values, const float* state) noexcept;

 private:
  bool owns(Key key) const noexcept;
  // Checks every key and maps it to its row (created if new): BadKey for a
  // foreign key, TableFull when the new rows would pass max_rows (then
  // nothing is created).
  PsStatus map_keys(const std::byte* keys, std::uint32_t count) noexcept;
  // Whether creating the rows `keys` lack keeps the table within max_rows.
  bool room_for(const std::byte* keys, std::uint32_t count) noexcept;
  std::uint32_t row_for(Key key);
  std::uint32_t create_row(Key key);
  void apply(float* w, float* acc, const float* g, std::uint32_t n) const noexcept;

  TableSpec spec_;
  std::uint32_t shard_;
  std::uint32_t shards_;
  DenseSlice slice_;
  KeyIndex index_;
  // Bounded tables whose key range costs no more than the rows themselves:
  // key -> row + 1 (0: not yet created), one load instead of a hash probe
  // into a table several times the size of the cache.
  std::vector<std::uint32_t> direct_;
  std::vector<float> values_;  // rows x dim (embedding) or the slice (dense)
  std::vector<float> accum_;   // Adagrad: same layout; empty for SGD
  std::vector<Key> row_keys_;  // embedding: per row, its key (checkpoints list the rows with it)
  // Per request: the row of each key, and duplicate detection by stamp.
  std::vector<std::uint32_t> mapped_;
  std::vector<std::uint32_t> stamp_;  // per row: request number that last saw it
  std::vector<std::uint32_t> first_;  // per row: its position among the request's distinct rows
  std::vector<std::uint32_t> distinct_;
  std::vector<float> sum_;  // coalesced gradients, distinct rows x dim
  std::vector<Key> fresh_;  // room_for(): the keys of a request that have no row yet
  std::uint32_t epoch_ = 0;
  std::uint32_t distinct_count_ = 0;
};

}  // namespace ferry::ps::detail
