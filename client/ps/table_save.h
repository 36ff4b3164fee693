// Shard-side checkpoints of one table's part on one shard (wire Op::Save,
// docs/ps.md "Shard-side checkpoints"). A save writes, under
// CHECKPOINT_DIR/NAME/, the files of PART = TABLE.shard-K-of-N (TABLE the
// table's name where it is a plain file name, else table-ID):
//   PART.keys.npy    u64 [rows]        embedding: each row's key
//   PART.values.npy  f32 [rows, dim]   (dense: f32 [slice], the shard's elements)
//   PART.state.npy   the same layout   Adagrad: the accumulators
//   PART.json        what the part is; written last, so a part with one is whole
// a step of rows at a time into hidden files that the last step syncs and
// renames into place. A shard started with ShardSpec::restore reads its
// parts back (restore_table), or with another shard count every part.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "client/ps/npy_file.h"
#include "client/ps/table_store.h"
#include "ferry/error.h"
#include "ferry/ps/wire.h"

namespace ferry::ps::detail {

// Where a shard's parts go.
struct PartPlace {
  std::string dir;  // ShardSpec::checkpoint_dir
  std::uint32_t shard = 0;
  std::uint32_t shards = 1;
};

// Whether `name` may name a checkpoint: 1 to kMaxSaveName of [A-Za-z0-9._-], not starting with '.'.
bool valid_checkpoint_name(std::string_view name) noexcept;

// DIR/NAME/PART, without the extension.
std::string part_path(const PartPlace& place, std::string_view name, const TableSpec& table);

// What a save writes of one table, taken from its store by the thread that
// serves it: the spec and slice never change, so a writer thread may read them.
struct PartInfo {
  const TableSpec* spec = nullptr;
  bool state = false;               // optimizer state to save (Adagrad)
  std::uint64_t first_element = 0;  // dense: the slice's first element
};

// One step's rows where they lie: in the store itself (a step written on
// the serving thread) or in a copy of them (a step written by SaveWriter).
struct StepRows {
  const Key* keys = nullptr;  // embedding tables; null for dense ones
  const float* values = nullptr;
  const float* state = nullptr;  // null without optimizer state
  std::uint64_t rows = 0;        // rows from the step's first (fewer than asked: the part's last step)
};

PartInfo part_info(const TableStore& store) noexcept;
// Rows [first, first + count) of `store`, as many of them as it holds.
// `first` continues a save (check() said Ok), so it is never past the rows held.
StepRows step_rows(const TableStore& store, std::uint32_t first, std::uint32_t count) noexcept;

class TableSaver {
 public:
  // Whether a step at `first` of NAME may go on: a step at 0 starts (over),
  // any other continues the save in progress where the last step ended
  // (else BadRange). Only reads this saver's state.
  [[nodiscard]] PsStatus check(std::string_view name, std::uint32_t first) const noexcept;
  // Writes one checked step's `rows` into NAME's part and syncs them;
  // *written: rows.rows (fewer than `count`: the last step, and the part
  // is on disk). Exists when NAME holds the part already, IoFailed when the
  // files cannot be written (the reason goes to stderr; nothing is kept).
  // Touches only this saver and the files, so any one thread may run it.
  [[nodiscard]] PsStatus write(const PartPlace& place, std::string_view name, const PartInfo& part, std::uint32_t first,
                               std::uint32_t count, const StepRows& rows, std::uint32_t* written) noexcept;
  // write() in three parts, for a writer handed a step's rows a piece at a
  // time: begin_step() (a step at 0 starts NAME's part), append() of each
  // piece in order, end_step() with the step's rows (it syncs them, and the
  // last step finishes the part). After a failure nothing more is called:
  // the part is abandoned already.
  [[nodiscard]] PsStatus begin_step(const PartPlace& place, std::string_view name, const PartInfo& part,
                                    std::uint32_t first) noexcept;
  [[nodiscard]] PsStatus append(const StepRows& rows, std::uint32_t dim) noexcept;
  [[nodiscard]] PsStatus end_step(const PartPlace& place, const PartInfo& part, std::uint32_t first,
                                  std::uint32_t count, std::uint64_t rows) noexcept;
  // Gives up the part in progress: nothing of it is kept.
  void cancel() noexcept { abandon(); }

 private:
  PsStatus start(const PartPlace& place, std::string_view name, const PartInfo& part);
  PsStatus finish(const PartInfo& part, const PartPlace& place);
  PsStatus failed(const Error& why) noexcept;
  void abandon() noexcept;

  bool open_ = false;
  std::string name_;
  std::string base_;  // part_path()
  std::uint64_t next_ = 0;
  NpyWriter keys_;
  NpyWriter values_;
  NpyWriter state_;
};

// Puts NAME's part of `store`'s table back into it (a shard starting).
// Taken with another shard count, NAME is read whole (every part must be
// in this shard's directory) and each shard keeps the rows it owns now.
// BadRequest, naming the file and what is wrong, when a part is missing,
// its shape or keys do not match the table, or a row would pass max_rows.
[[nodiscard]] Error restore_table(const PartPlace& place, std::string_view name, TableStore& store);

}  // namespace ferry::ps::detail
