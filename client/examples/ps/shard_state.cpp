#include "shard_state.h"

#include <cstring>

#include "ps_model.h"

namespace ferry::ps {

ShardState::ShardState(const ShardConfig& config) : config_(config) {
  // Keys k < keys with k % shards == index.
  rows_ = config.keys > config.index ? (config.keys - config.index + config.shards - 1) / config.shards : 0;
  table_.resize(rows_ * config.dim);
  for (std::uint64_t r = 0; r < rows_; ++r) {
    const std::uint64_t key = r * config.shards + config.index;
    for (std::uint32_t j = 0; j < config.dim; ++j) table_[r * config.dim + j] = initial_value(key, j);
  }
  dense_.resize(config.dense);
  for (std::uint32_t i = 0; i < config.dense; ++i)
    dense_[i] = initial_dense(std::uint64_t{config.index} * config.dense + i);
}

PsStatus ShardState::validate(std::span<const std::byte> req, const MsgHeader& h,
                              std::size_t response_cap) const noexcept {
  if (h.magic != kMagic) return PsStatus::BadMagic;
  if (h.version != kVersion) return PsStatus::BadVersion;
  if (h.op != static_cast<std::uint8_t>(PsOp::Pull) && h.op != static_cast<std::uint8_t>(PsOp::Push))
    return PsStatus::BadOp;
  if (h.status != 0) return PsStatus::BadField;
  if (h.dim != config_.dim) return PsStatus::BadDim;
  if (h.count > kMaxKeysPerMessage || h.dense_count > kMaxDense) return PsStatus::BadLength;
  if (std::uint64_t{h.dense_offset} + h.dense_count > dense_.size()) return PsStatus::BadDense;
  const bool pull = h.op == static_cast<std::uint8_t>(PsOp::Pull);
  const std::uint64_t want = pull ? pull_request_bytes(h.count) : push_request_bytes(h.count, h.dim, h.dense_count);
  if (req.size() != want) return PsStatus::BadLength;
  const std::uint64_t resp = pull ? pull_response_bytes(h.count, h.dim, h.dense_count) : push_response_bytes();
  if (resp > response_cap) return PsStatus::TooLarge;
  const auto* keys = reinterpret_cast<const std::uint64_t*>(req.data() + kHeaderBytes);
  for (std::uint32_t i = 0; i < h.count; ++i) {
    std::uint64_t k;
    std::memcpy(&k, keys + i, sizeof(k));  // the request buffer may be unaligned (TCP rx)
    if (k >= config_.keys || shard_of(k, config_.shards) != config_.index) return PsStatus::BadKey;
  }
  return PsStatus::Ok;
}

std::size_t ShardState::handle(std::span<const std::byte> req, std::span<std::byte> response) noexcept {
  if (response.size() < kHeaderBytes) return 0;
  ++requests_;
  MsgHeader h{};
  MsgHeader out{};
  PsStatus st = PsStatus::BadLength;
  if (req.size() >= kHeaderBytes) {
    std::memcpy(&h, req.data(), sizeof(h));
    out.op = h.op;
    out.request_id = h.request_id;
    st = validate(req, h, response.size());
  }
  std::size_t len = kHeaderBytes;
  if (st == PsStatus::Ok) {
    const std::uint32_t dim = config_.dim;
    const std::byte* keys = req.data() + kHeaderBytes;
    if (h.op == static_cast<std::uint8_t>(PsOp::Pull)) {
      std::byte* dst = response.data() + kHeaderBytes;
      for (std::uint32_t i = 0; i < h.count; ++i) {
        std::uint64_t k;
        std::memcpy(&k, keys + 8 * std::size_t{i}, sizeof(k));
        std::memcpy(dst, &table_[row_of(k, config_.shards) * dim], 4 * std::size_t{dim});
        dst += 4 * std::size_t{dim};
      }
      std::memcpy(dst, dense_.data() + h.dense_offset, 4 * std::size_t{h.dense_count});
      out.count = h.count;
      out.dim = dim;
      out.dense_offset = h.dense_offset;
      out.dense_count = h.dense_count;
      len = pull_response_bytes(h.count, dim, h.dense_count);
    } else {
      const std::byte* grads = keys + 8 * std::size_t{h.count};
      const float lr = config_.lr;
      float g[kMaxDim];
      for (std::uint32_t i = 0; i < h.count; ++i) {
        std::uint64_t k;
        std::memcpy(&k, keys + 8 * std::size_t{i}, sizeof(k));
        std::memcpy(g, grads + 4 * std::size_t{i} * dim, 4 * std::size_t{dim});
        float* row = &table_[row_of(k, config_.shards) * dim];
        for (std::uint32_t j = 0; j < dim; ++j) row[j] -= lr * g[j];  // SGD
      }
      const std::byte* dense_grads = grads + 4 * std::size_t{h.count} * dim;
      for (std::uint32_t i = 0; i < h.dense_count; ++i) {
        float d;
        std::memcpy(&d, dense_grads + 4 * std::size_t{i}, sizeof(d));
        dense_[h.dense_offset + i] -= lr * d;
      }
      out.count = h.count;
      out.dim = dim;
    }
  } else {
    ++rejected_;
  }
  out.status = static_cast<std::uint8_t>(st);
  std::memcpy(response.data(), &out, sizeof(out));
  return len;
}

}  // namespace ferry::ps
