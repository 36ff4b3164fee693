#include "ferry/ps/shard.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include <sys/stat.h>

#include "client/ps/save_writer.h"
#include "client/ps/table_save.h"
#include "client/ps/table_store.h"

namespace ferry::ps {

namespace {

// Whether every one of `n` floats (unaligned) is finite: the exponent bits not all set.
bool all_finite(const std::byte* values, std::size_t n) noexcept {
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, values + 4 * i, 4);
    bad |= static_cast<std::uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
  }
  return bad == 0;
}

bool allowed(const std::vector<std::uint32_t>& who, std::uint32_t caller) noexcept {
  return who.empty() || std::find(who.begin(), who.end(), caller) != who.end();
}

std::size_t error_record(std::span<std::byte> response, PsStatus st, std::uint8_t op) noexcept {
  if (response.size() < kErrorBytes) return 0;
  const ErrorRecord e{kErrorMark, static_cast<std::uint8_t>(st), op};
  std::memcpy(response.data(), &e, kErrorBytes);
  return kErrorBytes;
}

}  // namespace

Error Shard::create(const ShardSpec& spec, std::unique_ptr<Shard>* out) {
  if (spec.shards == 0 || spec.shards > kMaxShards || spec.index >= spec.shards)
    return Error::bad_request("shard " + std::to_string(spec.index) + " of " + std::to_string(spec.shards) +
                              ": need 0 <= index < shards <= " + std::to_string(kMaxShards));
  if (spec.max_count == 0 || spec.max_count > kMaxCount)
    return Error::bad_request("max_count must be in [1, " + std::to_string(kMaxCount) + "]");
  if (Error bad = check_tables(spec.tables); bad.failed()) return bad;
  if (!spec.checkpoint_dir.empty()) {
    struct stat st {};
    if (::stat(spec.checkpoint_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return Error::bad_request("checkpoint directory '" + spec.checkpoint_dir + "' is not a directory");
  }
  if (!spec.restore.empty()) {
    if (spec.checkpoint_dir.empty()) return Error::bad_request("restore needs the checkpoint directory it is in");
    if (!detail::valid_checkpoint_name(spec.restore))
      return Error::bad_request("checkpoint name '" + spec.restore + "': use 1 to " + std::to_string(kMaxSaveName) +
                                " of A-Z a-z 0-9 . _ -, not starting with '.'");
  }
  std::unique_ptr<Shard> shard(new Shard(spec));
  if (!spec.restore.empty())
    if (Error e = shard->restore(); e.failed()) return e;
  *out = std::move(shard);
  return {};
}

Error Shard::restore() {
  const detail::PartPlace place{spec_.checkpoint_dir, spec_.index, spec_.shards};
  for (const TableSpec& t : spec_.tables) {
    if (Error e = detail::restore_table(place, spec_.restore, *stores_[t.id]); e.failed()) return e;
    publish_usage(t.id);
  }
  return {};
}

Shard::Shard(const ShardSpec& spec) : spec_(spec) {
  for (const TableSpec& t : spec.tables) {
    if (t.id >= stores_.size()) stores_.resize(std::size_t{t.id} + 1);
    stores_[t.id] = std::make_unique<detail::TableStore>(t, spec.index, spec.shards, spec.max_count, spec.preload);
  }
  gauges_ = std::make_unique<Gauge[]>(stores_.size());
  savers_.resize(stores_.size());
  for (const TableSpec& t : spec.tables) publish_usage(t.id);
}

void Shard::publish_usage(TableId table) noexcept {
  const detail::TableStore& st = *stores_[table];
  const std::uint64_t rows = st.spec().kind == TableKind::Dense ? st.slice().size() : st.rows_held();
  gauges_[table].rows.store(rows, std::memory_order_relaxed);
  gauges_[table].bytes.store(st.bytes_held(), std::memory_order_relaxed);
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

std::vector<TableUsage> Shard::usage() const {
  std::vector<TableUsage> out;
  for (const TableSpec& t : spec_.tables)
    out.push_back(TableUsage{t.id, gauges_[t.id].rows.load(std::memory_order_relaxed),
                             gauges_[t.id].bytes.load(std::memory_order_relaxed)});
  return out;
}

std::size_t Shard::handle(std::span<const std::byte> request, std::span<std::byte> response,
                          std::uint32_t caller) noexcept {
  tallies_.requests.add();
  Header h{};
  std::size_t length = 0;
  PsStatus st = PsStatus::BadLength;
  if (request.size() >= kHeaderBytes) {
    std::memcpy(&h, request.data(), sizeof h);
    st = run(h, request, response, caller, &length);
  }
  return answer(st, h.op, response, length);
}

std::size_t Shard::answer(PsStatus st, std::uint8_t op, std::span<std::byte> response, std::size_t length) noexcept {
  if (st == PsStatus::Ok) return length;
  tallies_.rejected.add();
  if (st == PsStatus::NonFinite) tallies_.non_finite.add();
  if (st == PsStatus::Forbidden) tallies_.forbidden.add();
  if (st == PsStatus::TableFull) tallies_.table_full.add();
  if (st == PsStatus::IoFailed) tallies_.save_failed.add();
  return error_record(response, st, op);
}

PsStatus Shard::run(const Header& h, std::span<const std::byte> request, std::span<std::byte> response,
                    std::uint32_t caller, std::size_t* length) noexcept {
  if (h.magic != kMagic) return PsStatus::BadMagic;
  if (h.version != kVersion) return PsStatus::BadVersion;
  if (h.op < static_cast<std::uint8_t>(Op::Pull) || h.op > static_cast<std::uint8_t>(Op::Save)) return PsStatus::BadOp;
  if ((h.flags & ~kFlagState) != 0 || h.dtype != 0 || h.reserved0 != 0 || h.reserved1 != 0) return PsStatus::BadField;
  if (h.table >= stores_.size() || !stores_[h.table]) return PsStatus::BadTable;
  if (h.op == static_cast<std::uint8_t>(Op::Save)) return save(h, request, response, caller, length);
  detail::TableStore& store = *stores_[h.table];
  const TableSpec& t = store.spec();
  const bool state = h.flags == kFlagState;
  if (state && (h.op == static_cast<std::uint8_t>(Op::Push) || !store.has_state())) return PsStatus::BadField;
  if (h.dim != t.dim) return PsStatus::BadDim;
  if (h.count > spec_.max_count) return PsStatus::TooLarge;
  if (t.kind == TableKind::Embedding && h.offset != 0) return PsStatus::BadField;
  const Op op = static_cast<Op>(h.op);
  if (request.size() != request_bytes(op, t.kind, h.count, t.dim)) return PsStatus::BadLength;
  const std::size_t out = response_bytes(op, h.count, t.dim);
  if (out > response.size()) return PsStatus::TooLarge;
  const std::byte* body = request.data() + kHeaderBytes;
  const std::byte* values = body + (t.kind == TableKind::Embedding ? 8 * std::size_t{h.count} : 0);
  const TableAccess& acl = t.access;
  if (!allowed(op == Op::Pull ? acl.pull : op == Op::Push ? acl.push : acl.assign, caller)) return PsStatus::Forbidden;
  if (op != Op::Pull && !spec_.allow_non_finite && !all_finite(values, std::size_t{h.count} * t.dim))
    return PsStatus::NonFinite;
  std::uint32_t applied = h.count;
  PsStatus st = PsStatus::Ok;
  // The response buffer is the caller's (a tx arena block or a vector): float-aligned.
  float* rows = reinterpret_cast<float*>(response.data());
  switch (op) {
    case Op::Pull:
      st = t.kind == TableKind::Dense ? store.pull_dense(h.offset, h.count, rows, state)
           : state                    ? store.pull_state(body, h.count, rows)
                                      : store.pull(body, h.count, rows);
      tallies_.pulls.add();
      break;
    case Op::Push:
      st = t.kind == TableKind::Embedding ? store.push(body, h.count, values, &applied)
                                          : store.push_dense(h.offset, h.count, values);
      tallies_.pushes.add();
      break;
    case Op::Save: return PsStatus::BadOp;  // save() answered it
    case Op::Assign:
      st = t.kind == TableKind::Dense ? store.assign_dense(h.offset, h.count, values, state)
           : state                    ? store.assign_state(body, h.count, values, &applied)
                                      : store.assign(body, h.count, values, &applied);
      tallies_.assigns.add();
      break;
  }
  if (st != PsStatus::Ok) return st;
  if (op != Op::Pull && t.kind == TableKind::Embedding) publish_usage(h.table);
  tallies_.keys.add(h.count);
  if (op != Op::Pull) std::memcpy(response.data(), &applied, kAckBytes);
  *length = out;
  return PsStatus::Ok;
}

// The checks of a Save step wherever it is written; *name: the checkpoint's.
PsStatus Shard::check_save(const Header& h, std::span<const std::byte> request, std::uint32_t caller,
                           std::string_view* name) noexcept {
  const TableSpec& t = stores_[h.table]->spec();
  if (h.flags != 0 || h.count == 0) return PsStatus::BadField;
  if (h.dim != t.dim) return PsStatus::BadDim;
  if (h.count > kMaxCount) return PsStatus::TooLarge;
  *name = std::string_view(reinterpret_cast<const char*>(request.data()) + kHeaderBytes, request.size() - kHeaderBytes);
  if (!detail::valid_checkpoint_name(*name)) return PsStatus::BadField;
  if (!allowed(t.access.pull, caller)) return PsStatus::Forbidden;
  if (spec_.checkpoint_dir.empty()) return PsStatus::NotEnabled;
  if (still_stalled()) {
    std::fprintf(stderr,
                 "ferry ps: shard-side save of '%.*s' refused: an earlier save is still stuck in the filesystem "
                 "under '%s'\n",
                 static_cast<int>(name->size()), name->data(), spec_.checkpoint_dir.c_str());
    return PsStatus::IoFailed;
  }
  auto& saver = savers_[h.table];
  if (!saver) {
    try {
      saver = std::make_shared<detail::TableSaver>();
    } catch (const std::bad_alloc&) {
      return PsStatus::IoFailed;
    }
  }
  return saver->check(*name, h.offset);
}

// One step of a shard-side checkpoint (wire.h, Op::Save), on this thread.
PsStatus Shard::save(const Header& h, std::span<const std::byte> request, std::span<std::byte> response,
                     std::uint32_t caller, std::size_t* length) noexcept {
  if (response.size() < kAckBytes) return PsStatus::TooLarge;
  // A step in the background ends first (one step at a time), or is given up as stalled.
  if (writer_ && !writer_->finish(std::chrono::milliseconds(spec_.save_stall_ms))) give_up_stalled();
  std::string_view name;
  if (const PsStatus st = check_save(h, request, caller, &name); st != PsStatus::Ok) return st;
  const detail::TableStore& store = *stores_[h.table];
  const detail::PartPlace place{spec_.checkpoint_dir, spec_.index, spec_.shards};
  std::uint32_t written = 0;
  const PsStatus st = savers_[h.table]->write(place, name, detail::part_info(store), h.offset, h.count,
                                              detail::step_rows(store, h.offset, h.count), &written);
  if (st != PsStatus::Ok) return st;
  tallies_.saves.add();
  std::memcpy(response.data(), &written, kAckBytes);
  *length = kAckBytes;
  return PsStatus::Ok;
}

Shard::SaveStart Shard::begin_save(std::span<const std::byte> request, std::uint32_t caller) noexcept {
  Header h{};
  if (request.size() < kHeaderBytes) return SaveStart::Handle;
  std::memcpy(&h, request.data(), sizeof h);
  if (h.op != static_cast<std::uint8_t>(Op::Save)) return SaveStart::Handle;
  if (h.magic != kMagic || h.version != kVersion || h.table >= stores_.size() || !stores_[h.table])
    return SaveStart::Handle;
  if (save_running()) return SaveStart::Wait;
  if (still_stalled()) return SaveStart::Handle;  // handle() refuses it, with the log line
  std::string_view name;
  if (check_save(h, request, caller, &name) != PsStatus::Ok) return SaveStart::Handle;  // handle() says why
  const detail::TableStore& store = *stores_[h.table];
  if (!writer_) {
    auto w = std::unique_ptr<detail::SaveWriter>(new (std::nothrow) detail::SaveWriter());
    if (!w || w->start().failed()) return SaveStart::Handle;
    writer_ = std::move(w);
  }
  const detail::PartPlace place{spec_.checkpoint_dir, spec_.index, spec_.shards};
  const std::uint64_t rows = detail::step_rows(store, h.offset, h.count).rows;
  if (!writer_->begin(savers_[h.table], store, place, name, h.offset, h.count, rows)) return SaveStart::Handle;
  saving_ = h.table;
  tallies_.requests.add();
  return SaveStart::Began;
}

void Shard::save_turn() noexcept {
  if (!writer_) return;
  writer_->turn();
  if (spec_.save_stall_ms != 0 && writer_->stalled(std::chrono::milliseconds(spec_.save_stall_ms))) give_up_stalled();
}

void Shard::give_up_stalled() noexcept {
  if (writer_->cancel(std::chrono::milliseconds(0))) return;  // it returned just now: its outcome stands
  std::fprintf(stderr,
               "ferry ps: shard-side save of table '%s' under '%s' failed: its writer has been in one filesystem "
               "call for over %u ms (a disk that hangs?); later saves are refused until that call returns\n",
               stores_[saving_]->spec().name.c_str(), spec_.checkpoint_dir.c_str(), spec_.save_stall_ms);
  stalled_ = std::move(writer_);  // it removes what it wrote once its call returns
  savers_[saving_].reset();       // the stuck writer keeps its own; the next save gets a new one
  given_up_ = true;
}

bool Shard::still_stalled() noexcept {
  if (!stalled_) return false;
  if (!stalled_->ready()) return true;
  (void)stalled_->take();
  stalled_.reset();  // back from its call: joined
  return false;
}

bool Shard::save_running() const noexcept { return given_up_ || (writer_ && writer_->busy()); }
bool Shard::save_ready() const noexcept { return given_up_ || (writer_ && writer_->busy() && writer_->ready()); }
int Shard::save_event_fd() const noexcept { return writer_ ? writer_->event_fd() : -1; }

std::size_t Shard::end_save(std::span<std::byte> response) noexcept {
  const auto save = static_cast<std::uint8_t>(Op::Save);
  if (!save_ready()) return answer(PsStatus::BadOp, save, response, 0);  // nothing to answer: a caller's mistake
  if (given_up_) {
    given_up_ = false;
    return answer(PsStatus::IoFailed, save, response, 0);
  }
  const detail::SaveWriter::Outcome out = writer_->take();
  if (out.status != PsStatus::Ok) return answer(out.status, save, response, 0);
  if (response.size() < kAckBytes) return answer(PsStatus::TooLarge, save, response, 0);
  tallies_.saves.add();
  std::memcpy(response.data(), &out.written, kAckBytes);
  return kAckBytes;
}

void Shard::drop_save() noexcept {
  given_up_ = false;
  if (!save_running()) return;
  if (writer_->cancel()) {
    (void)writer_->take();
    return;
  }
  // Stuck: it keeps its saver and state, and ends on its own; the next save gets new ones.
  savers_[saving_].reset();
  writer_.reset();
}

}  // namespace ferry::ps
