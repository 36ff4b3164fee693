#include "client/ps/table_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ferry::ps::detail {

namespace {

Key key_at(const std::byte* keys, std::uint32_t i) noexcept {
  Key k;
  std::memcpy(&k, keys + 8 * std::size_t{i}, sizeof k);  // requests may be unaligned (TCP rx)
  return k;
}

// Rows a shard can expect of a bounded table: its share plus a few standard deviations.
std::uint64_t expected_rows(const TableSpec& t, std::uint32_t shards) {
  if (t.rows == 0) return 1024;
  const std::uint64_t share = t.rows / shards;
  return share + 4 * static_cast<std::uint64_t>(std::sqrt(static_cast<double>(share))) + 64;
}

}  // namespace

TableStore::TableStore(const TableSpec& spec, std::uint32_t shard, std::uint32_t shards, std::uint32_t max_count,
                       bool preload)
    : spec_(spec), shard_(shard), shards_(shards), index_(spec.kind == TableKind::Embedding ? 8 : 0) {
  const bool adagrad = spec.optimizer.kind == OptimizerKind::Adagrad;
  if (spec.kind == TableKind::Dense) {
    slice_ = dense_slice(spec.rows, shard, shards);
    values_.resize(slice_.size());
    for (std::uint64_t e = 0; e < slice_.size(); ++e) values_[e] = initial_value(spec, slice_.begin + e, 0);
    if (adagrad) accum_.assign(slice_.size(), spec.optimizer.initial_accumulator);
    return;
  }
  const std::uint64_t rows = expected_rows(spec, shards);
  if (spec.rows != 0 && spec.rows <= rows * spec.dim && spec.rows < UINT32_MAX) {
    direct_.assign(spec.rows, 0);
  } else {
    index_.reserve(rows);
  }
  values_.reserve(rows * spec.dim);
  if (adagrad) accum_.reserve(rows * spec.dim);
  stamp_.reserve(rows);
  first_.reserve(rows);
  row_keys_.reserve(rows);
  mapped_.resize(max_count);
  if (spec.max_rows != 0) fresh_.reserve(max_count);
  distinct_.resize(max_count);
  sum_.resize(std::size_t{max_count} * spec.dim);
  if (preload && spec.rows != 0)
    for (Key k = 0; k < spec.rows; ++k)
      if (owns(k) && (spec.max_rows == 0 || rows_held() < spec.max_rows)) (void)row_for(k);
}

bool TableStore::owns(Key key) const noexcept {
  if (spec_.rows != 0 && key >= spec_.rows) return false;
  return shard_of(spec_.id, key, shards_) == shard_;
}

std::uint32_t TableStore::create_row(Key key) {
  const std::uint32_t r = static_cast<std::uint32_t>(stamp_.size());
  const std::size_t dim = spec_.dim;
  values_.resize(values_.size() + dim);
  initial_row(spec_, key, &values_[r * dim]);
  if (spec_.optimizer.kind == OptimizerKind::Adagrad)
    accum_.insert(accum_.end(), dim, spec_.optimizer.initial_accumulator);
  stamp_.push_back(0);
  first_.push_back(0);
  row_keys_.push_back(key);
  return r;
}

std::uint32_t TableStore::row_for(Key key) {
  if (!direct_.empty()) {  // owns() has checked key < rows
    std::uint32_t& slot = direct_[key];
    if (slot == 0) slot = create_row(key) + 1;
    return slot - 1;
  }
  bool inserted = false;
  const std::uint32_t r = index_.insert(key, &inserted);
  if (inserted) (void)create_row(key);  // the index numbers rows in insertion order, as create_row does
  return r;
}

bool TableStore::room_for(const std::byte* keys, std::uint32_t count) noexcept {
  // Cheap bound first: every key without a row counted, duplicates too.
  std::uint64_t missing = 0;
  for (std::uint32_t i = 0; i < count; ++i) missing += find_row(key_at(keys, i)) == nullptr ? 1 : 0;
  if (rows_held() + missing <= spec_.max_rows) return true;
  // Close to the limit: count the distinct ones.
  fresh_.clear();
  for (std::uint32_t i = 0; i < count; ++i)
    if (const Key k = key_at(keys, i); find_row(k) == nullptr) fresh_.push_back(k);
  std::sort(fresh_.begin(), fresh_.end());
  missing = static_cast<std::uint64_t>(std::unique(fresh_.begin(), fresh_.end()) - fresh_.begin());
  return rows_held() + missing <= spec_.max_rows;
}

PsStatus TableStore::map_keys(const std::byte* keys, std::uint32_t count) noexcept {
  for (std::uint32_t i = 0; i < count; ++i)
    if (!owns(key_at(keys, i))) return PsStatus::BadKey;
  if (spec_.max_rows != 0 && !room_for(keys, count)) return PsStatus::TableFull;
  // Every key is ours and fits: map them, creating the rows of new keys.
  if (++epoch_ == 0) {  // wrapped: forget every stamp
    std::fill(stamp_.begin(), stamp_.end(), 0);
    epoch_ = 1;
  }
  std::uint32_t distinct = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint32_t r = row_for(key_at(keys, i));
    mapped_[i] = r;
    if (stamp_[r] != epoch_) {
      stamp_[r] = epoch_;
      first_[r] = distinct;
      distinct_[distinct++] = r;
    }
  }
  distinct_count_ = distinct;
  return PsStatus::Ok;
}

namespace {

// torch.optim's arithmetic, rounding for rounding: torch's CPU kernels
// (AVX2 / AVX-512 builds) fuse `w + alpha * g` (SGD's add_) and
// `a + g * g` (Adagrad's addcmul_) into one multiply-add, and divide
// before they add in addcdiv_. std::fma rounds once on every machine; the
// "fma" clone makes it one instruction where the CPU has it.
// The cheap cost model of -O2 leaves this loop scalar; the dynamic one
// vectorizes it (the "fma" clone: 8-wide vfmadd). Element for element the
// same fma, so the same bits.
//
// The clones are chosen by an IFUNC resolver that the dynamic loader runs
// while it relocates the library; under ThreadSanitizer that resolver is
// instrumented and would call into a runtime not yet started (a crash
// before main), so TSan builds take the default clone only.
#if defined(__SANITIZE_THREAD__)
#define FERRY_FMA_CLONES
#else
#define FERRY_FMA_CLONES target_clones("default", "fma"),
#endif
__attribute__((FERRY_FMA_CLONES optimize("tree-loop-vectorize", "vect-cost-model=dynamic"))) void apply_sgd(
    float* __restrict w, const float* __restrict g, std::size_t n, float neg_lr) noexcept {
  for (std::size_t j = 0; j < n; ++j) w[j] = std::fma(neg_lr, g[j], w[j]);
}

__attribute__((FERRY_FMA_CLONES)) void apply_adagrad(float* w, float* acc, const float* g, std::uint32_t n,
                                                     float neg_lr, float eps) noexcept {
  for (std::uint32_t j = 0; j < n; ++j) {
    acc[j] = std::fma(g[j], g[j], acc[j]);                      // state_sum.addcmul_(g, g)
    w[j] = w[j] + (neg_lr * g[j]) / (std::sqrt(acc[j]) + eps);  // w.addcdiv_(g, sqrt(state) + eps, value=-lr)
  }
}

}  // namespace

void TableStore::apply(float* w, float* acc, const float* g, std::uint32_t n) const noexcept {
  const Optimizer& o = spec_.optimizer;
  if (o.kind == OptimizerKind::Sgd) {
    apply_sgd(w, g, n, -o.lr);
  } else {
    apply_adagrad(w, acc, g, n, -o.lr, o.eps);
  }
}

PsStatus TableStore::pull(const std::byte* keys, std::uint32_t count, float* out) noexcept {
  for (std::uint32_t i = 0; i < count; ++i)
    if (!owns(key_at(keys, i))) return PsStatus::BadKey;
  // A pull creates nothing: a key without a row reads the values its row
  // would start with, so read-only traffic over any key space costs no memory.
  const std::size_t dim = spec_.dim;
  for (std::uint32_t i = 0; i < count; ++i) {
    const Key k = key_at(keys, i);
    if (const float* row = find_row(k); row != nullptr) {
      std::memcpy(out + i * dim, row, 4 * dim);
    } else {
      initial_row(spec_, k, out + i * dim);
    }
  }
  return PsStatus::Ok;
}

PsStatus TableStore::push(const std::byte* keys, std::uint32_t count, const std::byte* grads,
                          std::uint32_t* applied) noexcept {
  if (const PsStatus st = map_keys(keys, count); st != PsStatus::Ok) return st;
  const std::size_t dim = spec_.dim;
  const bool adagrad = spec_.optimizer.kind == OptimizerKind::Adagrad;
  if (distinct_count_ == count) {
    // The common case (ferry workers coalesce before they send): apply each
    // key's gradient straight from the request, through an aligned copy.
    float* g = sum_.data();
    for (std::uint32_t i = 0; i < count; ++i) {
      const std::size_t r = mapped_[i];
      std::memcpy(g, grads + 4 * i * dim, 4 * dim);
      apply(&values_[r * dim], adagrad ? &accum_[r * dim] : nullptr, g, spec_.dim);
    }
  } else {
    // Sum each key's gradients (in request order), then apply once per key.
    std::uint32_t seen = 0;
    for (std::uint32_t i = 0; i < count; ++i) {
      const std::uint32_t r = mapped_[i];
      float* s = &sum_[first_[r] * dim];
      if (first_[r] == seen) {  // first occurrence: positions were handed out in this order
        std::memcpy(s, grads + 4 * i * dim, 4 * dim);
        ++seen;
      } else {
        float g[kMaxDim];
        std::memcpy(g, grads + 4 * i * dim, 4 * dim);
        for (std::size_t j = 0; j < dim; ++j) s[j] += g[j];
      }
    }
    for (std::uint32_t u = 0; u < distinct_count_; ++u) {
      const std::size_t r = distinct_[u];
      apply(&values_[r * dim], adagrad ? &accum_[r * dim] : nullptr, &sum_[u * dim], spec_.dim);
    }
  }
  *applied = distinct_count_;
  return PsStatus::Ok;
}

PsStatus TableStore::assign(const std::byte* keys, std::uint32_t count, const std::byte* values,
                            std::uint32_t* applied) noexcept {
  if (const PsStatus st = map_keys(keys, count); st != PsStatus::Ok) return st;
  const std::size_t dim = spec_.dim;
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::size_t r = mapped_[i];
    std::memcpy(&values_[r * dim], values + 4 * i * dim, 4 * dim);  // a later duplicate wins
    if (!accum_.empty()) std::fill_n(&accum_[r * dim], dim, spec_.optimizer.initial_accumulator);
  }
  *applied = distinct_count_;
  return PsStatus::Ok;
}

PsStatus TableStore::pull_state(const std::byte* keys, std::uint32_t count, float* out) noexcept {
  for (std::uint32_t i = 0; i < count; ++i)
    if (!owns(key_at(keys, i))) return PsStatus::BadKey;
  const std::size_t dim = spec_.dim;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (const float* row = find_row(key_at(keys, i)); row != nullptr) {
      std::memcpy(out + i * dim, accum_.data() + (row - values_.data()), 4 * dim);  // the same layout
    } else {
      std::fill_n(out + i * dim, dim, spec_.optimizer.initial_accumulator);
    }
  }
  return PsStatus::Ok;
}

namespace {

// Adagrad's state is a sum of squares: never negative.
bool valid_state(const std::byte* values, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, values + 4 * i, 4);
    if (v < 0.0f) return false;
  }
  return true;
}

}  // namespace

PsStatus TableStore::assign_state(const std::byte* keys, std::uint32_t count, const std::byte* values,
                                  std::uint32_t* applied) noexcept {
  const std::size_t dim = spec_.dim;
  if (!valid_state(values, std::size_t{count} * dim)) return PsStatus::BadField;
  if (const PsStatus st = map_keys(keys, count); st != PsStatus::Ok) return st;
  for (std::uint32_t i = 0; i < count; ++i)
    std::memcpy(&accum_[std::size_t{mapped_[i]} * dim], values + 4 * i * dim, 4 * dim);  // a later duplicate wins
  *applied = distinct_count_;
  return PsStatus::Ok;
}

PsStatus TableStore::pull_dense(std::uint32_t offset, std::uint32_t count, float* out, bool state) const noexcept {
  if (offset < slice_.begin || std::uint64_t{offset} + count > slice_.end) return PsStatus::BadRange;
  std::memcpy(out, &(state ? accum_ : values_)[offset - slice_.begin], 4 * std::size_t{count});
  return PsStatus::Ok;
}

PsStatus TableStore::push_dense(std::uint32_t offset, std::uint32_t count, const std::byte* grads) noexcept {
  if (offset < slice_.begin || std::uint64_t{offset} + count > slice_.end) return PsStatus::BadRange;
  const std::size_t base = offset - slice_.begin;
  constexpr std::uint32_t kChunk = 1024;
  float g[kChunk];
  for (std::uint32_t done = 0; done < count; done += kChunk) {
    const std::uint32_t n = std::min(kChunk, count - done);
    std::memcpy(g, grads + 4 * std::size_t{done}, 4 * std::size_t{n});
    apply(&values_[base + done], accum_.empty() ? nullptr : &accum_[base + done], g, n);
  }
  return PsStatus::Ok;
}

PsStatus TableStore::assign_dense(std::uint32_t offset, std::uint32_t count, const std::byte* values,
                                  bool state) noexcept {
  if (offset < slice_.begin || std::uint64_t{offset} + count > slice_.end) return PsStatus::BadRange;
  const std::size_t base = offset - slice_.begin;
  if (state) {
    if (!valid_state(values, count)) return PsStatus::BadField;
    std::memcpy(&accum_[base], values, 4 * std::size_t{count});
    return PsStatus::Ok;
  }
  std::memcpy(&values_[base], values, 4 * std::size_t{count});
  if (!accum_.empty()) std::fill_n(&accum_[base], count, spec_.optimizer.initial_accumulator);
  return PsStatus::Ok;
}

std::uint64_t TableStore::bytes_held() const noexcept {
  const std::size_t per_row_index = sizeof(std::uint32_t) * 2;  // stamp_, first_
  return 4 * (values_.capacity() + accum_.capacity()) + per_row_index * stamp_.capacity() +
         sizeof(Key) * row_keys_.capacity() + sizeof(std::uint32_t) * direct_.capacity() + index_.bytes();
}

PsStatus TableStore::restore_row(Key key, const float* values, const float* state) noexcept {
  const std::size_t dim = spec_.dim;
  std::size_t at = 0;
  if (spec_.kind == TableKind::Dense) {
    if (key < slice_.begin || key >= slice_.end) return PsStatus::BadKey;
    at = key - slice_.begin;
  } else {
    if (!owns(key)) return PsStatus::BadKey;
    if (spec_.max_rows != 0 && find_row(key) == nullptr && rows_held() >= spec_.max_rows) return PsStatus::TableFull;
    try {
      at = std::size_t{row_for(key)} * dim;
    } catch (...) {
      return PsStatus::TableFull;  // out of memory: as many rows as this host holds
    }
  }
  std::memcpy(&values_[at], values, 4 * dim);
  if (!accum_.empty() && state != nullptr) std::memcpy(&accum_[at], state, 4 * dim);
  return PsStatus::Ok;
}

const float* TableStore::find_row(Key key) const noexcept {
  if (spec_.kind == TableKind::Dense) {
    if (key < slice_.begin || key >= slice_.end) return nullptr;
    return &values_[key - slice_.begin];
  }
  if (!direct_.empty()) {
    if (key >= direct_.size() || direct_[key] == 0) return nullptr;
    return &values_[std::size_t{direct_[key] - 1} * spec_.dim];
  }
  const std::uint32_t r = index_.find(key);
  return r == KeyIndex::kNone ? nullptr : &values_[std::size_t{r} * spec_.dim];
}

}  // namespace ferry::ps::detail
