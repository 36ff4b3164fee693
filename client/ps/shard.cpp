#include "ferry/ps/shard.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "client/ps/table_store.h"

namespace ferry::ps {

namespace {

std::size_t error_record(std::span<std::byte> response, PsStatus st, std::uint8_t op) noexcept {
  if (response.size() < kErrorBytes) return 0;
  const ErrorRecord e{kErrorMark, static_cast<std::uint8_t>(st), op};
  std::memcpy(response.data(), &e, kErrorBytes);
  return kErrorBytes;
}

}  // namespace

Shard::Shard(const ShardSpec& spec) : spec_(spec) {
  if (spec.shards == 0 || spec.shards > kMaxShards || spec.index >= spec.shards)
    throw std::invalid_argument("shard " + std::to_string(spec.index) + " of " + std::to_string(spec.shards) +
                                ": need 0 <= index < shards <= " + std::to_string(kMaxShards));
  if (spec.max_count == 0 || spec.max_count > kMaxCount)
    throw std::invalid_argument("max_count must be in [1, " + std::to_string(kMaxCount) + "]");
  for (const TableSpec& t : spec.tables) {
    if (const std::string why = table_error(t); !why.empty()) throw std::invalid_argument(why);
    if (t.id >= stores_.size()) stores_.resize(std::size_t{t.id} + 1);
    if (stores_[t.id]) throw std::invalid_argument("table id " + std::to_string(t.id) + " given twice");
    stores_[t.id] = std::make_unique<detail::TableStore>(t, spec.index, spec.shards, spec.max_count, spec.preload);
  }
}

Shard::~Shard() = default;

std::size_t Shard::max_request_bytes() const noexcept {
  std::size_t most = kHeaderBytes;
  for (const TableSpec& t : spec_.tables)
    most = std::max<std::size_t>(most, request_bytes(Op::Push, t.kind, spec_.max_count, t.dim));
  return most;
}

std::size_t Shard::max_response_bytes() const noexcept {
  std::size_t most = kAckBytes;
  for (const TableSpec& t : spec_.tables)
    most = std::max<std::size_t>(most, response_bytes(Op::Pull, spec_.max_count, t.dim));
  return most;
}

const float* Shard::find(TableId table, Key key) const noexcept {
  if (table >= stores_.size() || !stores_[table]) return nullptr;
  return stores_[table]->find_row(key);
}

std::size_t Shard::handle(std::span<const std::byte> request, std::span<std::byte> response) noexcept {
  ++counters_.requests;
  Header h{};
  std::size_t length = 0;
  PsStatus st = PsStatus::BadLength;
  if (request.size() >= kHeaderBytes) {
    std::memcpy(&h, request.data(), sizeof h);
    st = run(h, request, response, &length);
  }
  if (st == PsStatus::Ok) return length;
  ++counters_.rejected;
  return error_record(response, st, h.op);
}

PsStatus Shard::run(const Header& h, std::span<const std::byte> request, std::span<std::byte> response,
                    std::size_t* length) noexcept {
  if (h.magic != kMagic) return PsStatus::BadMagic;
  if (h.version != kVersion) return PsStatus::BadVersion;
  if (h.op < static_cast<std::uint8_t>(Op::Pull) || h.op > static_cast<std::uint8_t>(Op::Assign))
    return PsStatus::BadOp;
  if (h.flags != 0 || h.dtype != 0 || h.reserved0 != 0 || h.reserved1 != 0) return PsStatus::BadField;
  if (h.table >= stores_.size() || !stores_[h.table]) return PsStatus::BadTable;
  detail::TableStore& store = *stores_[h.table];
  const TableSpec& t = store.spec();
  if (h.dim != t.dim) return PsStatus::BadDim;
  if (h.count > spec_.max_count) return PsStatus::TooLarge;
  if (t.kind == TableKind::Embedding && h.offset != 0) return PsStatus::BadField;
  const Op op = static_cast<Op>(h.op);
  if (request.size() != request_bytes(op, t.kind, h.count, t.dim)) return PsStatus::BadLength;
  const std::size_t out = response_bytes(op, h.count, t.dim);
  if (out > response.size()) return PsStatus::TooLarge;
  const std::byte* body = request.data() + kHeaderBytes;
  const std::byte* values = body + (t.kind == TableKind::Embedding ? 8 * std::size_t{h.count} : 0);
  std::uint32_t applied = h.count;
  PsStatus st = PsStatus::Ok;
  // The response buffer is the caller's (a tx arena block or a vector): float-aligned.
  float* rows = reinterpret_cast<float*>(response.data());
  switch (op) {
    case Op::Pull:
      st = t.kind == TableKind::Embedding ? store.pull(body, h.count, rows) : store.pull_dense(h.offset, h.count, rows);
      ++counters_.pulls;
      break;
    case Op::Push:
      st = t.kind == TableKind::Embedding ? store.push(body, h.count, values, &applied)
                                          : store.push_dense(h.offset, h.count, values);
      ++counters_.pushes;
      break;
    case Op::Assign:
      st = t.kind == TableKind::Embedding ? store.assign(body, h.count, values, &applied)
                                          : store.assign_dense(h.offset, h.count, values);
      ++counters_.assigns;
      break;
  }
  if (st != PsStatus::Ok) return st;
  counters_.keys += h.count;
  if (op != Op::Pull) std::memcpy(response.data(), &applied, kAckBytes);
  *length = out;
  return PsStatus::Ok;
}

}  // namespace ferry::ps
