// The background half of shard-side saves (Shard::begin_save): a thread
// that writes and syncs one Save step's rows while the shard's serving
// thread answers other requests. The serving thread copies the step's rows
// a piece at a time (about kPieceBytes, a fraction of a millisecond) into
// one of two piece buffers, between the requests it answers (turn()); the
// writer appends each piece to the part's files and frees its buffer, and
// after the last piece syncs them. The step's answer waits for the disk,
// the shard's other callers wait for a piece's copy at most.
//
// One step at a time. The serving thread calls everything here; the writer
// thread runs TableSaver's begin_step/append/end_step on what it was
// handed. A piece buffer belongs to the serving thread while it is not
// `full` and to the writer while it is; the flag changes under the mutex,
// which orders the copy before the write and the write before the next copy.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/ps/table_save.h"
#include "client/ps/table_store.h"
#include "ferry/error.h"

namespace ferry::ps::detail {

// The bytes of rows (keys, values, state) a piece holds: at least one row.
inline constexpr std::size_t kPieceBytes = 1u << 20;

// Rows of a piece for rows of `row_bytes` bytes.
constexpr std::uint64_t piece_rows(std::size_t row_bytes) noexcept {
  return row_bytes >= kPieceBytes ? 1 : kPieceBytes / row_bytes;
}

class SaveWriter {
 public:
  SaveWriter() = default;
  // Cancels a step still in progress (nothing of its part is kept), then stops.
  ~SaveWriter();
  SaveWriter(const SaveWriter&) = delete;
  SaveWriter& operator=(const SaveWriter&) = delete;

  // The thread and the event fd; once, before the first begin().
  [[nodiscard]] Error start();
  // Starts a step (only when not busy()): `rows` rows of `store` from row
  // `first`, counted now (rows created later are the next step's), into
  // NAME's part through `saver`; then copies its first pieces (turn()).
  // false when the piece buffers find no memory: nothing began. `saver`
  // and `store` must outlive the step.
  [[nodiscard]] bool begin(TableSaver& saver, const TableStore& store, const PartPlace& place, std::string_view name,
                           std::uint32_t first, std::uint32_t count, std::uint64_t rows) noexcept;
  // Copies the step's next pieces into the buffers the writer has freed.
  // Call it between requests, whenever event_fd() is readable.
  void turn() noexcept;
  // A step began and its outcome was not yet taken.
  bool busy() const noexcept { return busy_; }
  // The step is written and synced, or failed: take() has its outcome.
  bool ready() const noexcept { return ready_.load(std::memory_order_acquire); }
  // Readable when the writer freed a piece buffer or the step ended: to
  // sleep in poll() beside other fds.
  int event_fd() const noexcept { return event_fd_; }
  // Runs the step to its end from this thread (copying its pieces as the
  // writer frees buffers): a serving thread that must write a step itself.
  void finish() noexcept;
  // Gives the step up (its part's files are removed; a step the writer
  // already synced keeps its outcome) and waits for the writer.
  void cancel() noexcept;

  struct Outcome {
    PsStatus status = PsStatus::Ok;
    std::uint32_t written = 0;
  };
  // The outcome of the step (only when ready()); the writer is free again.
  Outcome take() noexcept;

 private:
  void run() noexcept;
  // The writer's part of one step: Ok, or why it stopped.
  PsStatus write_step() noexcept;
  bool piece_free() noexcept;

  struct Piece {
    std::vector<Key> keys;
    std::vector<float> values;
    std::vector<float> state;
    std::uint64_t rows = 0;
    bool full = false;  // under mu_: copied, not yet written
  };

  std::mutex mu_;
  std::condition_variable wake_;   // to the writer: a step began, a piece is full, cancel, stop
  std::condition_variable freed_;  // to the serving thread: a piece was freed, or the step ended
  bool has_step_ = false;          // under mu_
  bool cancel_ = false;            // under mu_
  bool stop_ = false;              // under mu_
  Outcome outcome_;                // under mu_
  std::atomic<bool> ready_{false};
  Piece pieces_[2];

  // The step, set by begin() before the writer is woken, then read by both.
  TableSaver* saver_ = nullptr;
  PartPlace place_;
  std::string name_;
  PartInfo part_;
  std::uint32_t first_ = 0;
  std::uint32_t count_ = 0;
  std::uint64_t rows_ = 0;
  // The serving thread's.
  const TableStore* store_ = nullptr;
  std::uint64_t per_piece_ = 1;
  std::uint64_t copied_ = 0;
  unsigned fill_ = 0;  // the piece to copy into next
  bool busy_ = false;

  int event_fd_ = -1;
  std::thread thread_;
};

}  // namespace ferry::ps::detail
