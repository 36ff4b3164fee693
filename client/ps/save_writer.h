// The background half of shard-side saves (Shard::begin_save): a thread
// that writes and syncs one Save step's rows while the shard's serving
// thread answers other requests. The serving thread copies the step's rows
// a piece at a time (about kPieceBytes, a fraction of a millisecond) into
// one of two piece buffers, between the requests it answers (turn()); the
// writer appends each piece to the part's files and frees its buffer, and
// after the last piece syncs them. The step's answer waits for the disk,
// the shard's other callers wait for two pieces' copy at most.
//
// One step at a time. The serving thread calls everything here; the writer
// thread runs TableSaver's begin_step/append/end_step on what it was
// handed. A piece buffer belongs to the serving thread while it is not
// `full` and to the writer while it is; the flag changes under the mutex,
// which orders the copy before the write and the write before the next copy.
//
// Everything the writer touches (the hand-over state, the pieces, the
// table's spec and its TableSaver) is shared with it, so that a writer
// stuck in a system call (a disk or a network filesystem that hangs) is
// left to end on its own instead of holding up the shard's exit: it then
// finds its step cancelled and removes what it wrote.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <thread>

#include "client/ps/table_save.h"
#include "client/ps/table_store.h"
#include "ferry/error.h"

namespace ferry::ps::detail {

// The bytes of rows (keys, values, state) a piece holds: at least one row.
inline constexpr std::size_t kPieceBytes = 256u << 10;
// How long cancel() and stopping wait for a writer before leaving it to end on its own.
inline constexpr std::chrono::milliseconds kWriterPatience{2000};

// Rows of a piece for rows of `row_bytes` bytes.
constexpr std::uint64_t piece_rows(std::size_t row_bytes) noexcept {
  return row_bytes >= kPieceBytes ? 1 : kPieceBytes / row_bytes;
}

class SaveWriter {
 public:
  SaveWriter();
  // Cancels a step still in progress (nothing of its part is kept) and
  // stops the writer, waiting kWriterPatience at most for it.
  ~SaveWriter();
  SaveWriter(const SaveWriter&) = delete;
  SaveWriter& operator=(const SaveWriter&) = delete;

  // The thread and the event fd; once, before the first begin().
  [[nodiscard]] Error start();
  // Starts a step (only when not busy()): `rows` rows of `store` from row
  // `first`, counted now (rows created later are the next step's), into
  // NAME's part through `saver`; then copies its first pieces (turn()).
  // false when the piece buffers find no memory: nothing began. `store`
  // must outlive the step; the writer keeps `saver` as long as it needs it.
  [[nodiscard]] bool begin(const std::shared_ptr<TableSaver>& saver, const TableStore& store, const PartPlace& place,
                           std::string_view name, std::uint32_t first, std::uint32_t count,
                           std::uint64_t rows) noexcept;
  // Copies the step's next pieces (two at most) into the buffers the
  // writer has freed. Call it between requests, whenever event_fd() is
  // readable.
  void turn() noexcept;
  // A step began and its outcome was not yet taken.
  bool busy() const noexcept { return busy_; }
  // The writer has been inside one filesystem call (open, write, sync,
  // rename, remove) of this step for longer than `limit`: stuck, as on a
  // disk or network filesystem that hangs. Time it waits for a piece does
  // not count.
  bool stalled(std::chrono::milliseconds limit) const noexcept;
  // The step is written and synced, or failed: take() has its outcome.
  bool ready() const noexcept;
  // Readable when the writer freed a piece buffer or the step ended: to
  // sleep in poll() beside other fds.
  int event_fd() const noexcept;
  // Runs the step to its end from this thread (copying its pieces as the
  // writer frees buffers): a serving thread that must write a step itself.
  // false when the writer is stalled(`stall`) first (0: no limit).
  [[nodiscard]] bool finish(std::chrono::milliseconds stall) noexcept;
  // Gives the step up (its part's files are removed; a step the writer
  // already synced keeps its outcome) and waits `patience` at most for the
  // writer: whether it is ready() now. If not, the writer is stuck: leave
  // this object (and the saver) to it, and destroy it.
  [[nodiscard]] bool cancel(std::chrono::milliseconds patience = kWriterPatience) noexcept;

  struct Outcome {
    PsStatus status = PsStatus::Ok;
    std::uint32_t written = 0;
  };
  // The outcome of the step (only when ready()); the writer is free again.
  Outcome take() noexcept;

  // What the writer thread touches, shared with it (save_writer.cpp).
  struct Shared;

 private:
  bool piece_free() noexcept;

  std::shared_ptr<Shared> s_;
  // The serving thread's.
  const TableStore* store_ = nullptr;
  std::uint64_t per_piece_ = 1;
  std::uint64_t copied_ = 0;
  unsigned fill_ = 0;  // the piece to copy into next
  bool busy_ = false;
  bool stuck_ = false;  // a cancel() that the writer did not answer in time
  std::thread thread_;
};

}  // namespace ferry::ps::detail
