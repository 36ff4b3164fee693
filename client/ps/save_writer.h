// The background half of shard-side saves (Shard::begin_save): a thread
// that writes and syncs one Save step's rows while the shard's serving
// thread answers other requests. The serving thread copies the step's rows
// (a few milliseconds for 16 MiB, against the tenth of a second the disk
// takes) and hands them over; the step's answer waits for the disk, the
// shard's other callers do not.
//
// One step at a time. The serving thread calls everything here; the writer
// thread only runs TableSaver::write on what it was handed, and the mutex
// that hands a step over, and the release store of ready(), order the two.
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
#include "ferry/error.h"

namespace ferry::ps::detail {

// The most bytes of rows (keys, values, state) a step may have copied for
// the writer; a larger step is written on the serving thread, as Shard::handle does.
inline constexpr std::size_t kMaxStagedBytes = 64ull << 20;

std::size_t staged_bytes(const StepRows& rows, std::uint32_t dim) noexcept;

class SaveWriter {
 public:
  SaveWriter() = default;
  // Lets the step in progress finish (its files are then whole or removed), then stops.
  ~SaveWriter();
  SaveWriter(const SaveWriter&) = delete;
  SaveWriter& operator=(const SaveWriter&) = delete;

  // The thread and the event fd; once, before the first submit().
  [[nodiscard]] Error start();
  // Copies `rows` and hands the step to the writer thread (only when not
  // busy()); false when the copy finds no memory (nothing was handed over).
  // `saver` and `part.spec` must outlive the step.
  [[nodiscard]] bool submit(TableSaver& saver, const PartPlace& place, std::string_view name, const PartInfo& part,
                            std::uint32_t first, std::uint32_t count, const StepRows& rows) noexcept;
  // A step was handed over and its outcome not yet taken.
  bool busy() const noexcept { return busy_; }
  // The step is written, or failed: take() has its outcome.
  bool ready() const noexcept { return ready_.load(std::memory_order_acquire); }
  // Readable while ready(): to sleep in poll() beside other fds.
  int event_fd() const noexcept { return event_fd_; }
  // Blocks until ready() (a serving thread that must write a step itself).
  void wait() noexcept;

  struct Outcome {
    PsStatus status = PsStatus::Ok;
    std::uint32_t written = 0;
  };
  // The outcome of the step handed over (only when ready()); the writer is free again.
  Outcome take() noexcept;

 private:
  void run() noexcept;

  struct Job {
    TableSaver* saver = nullptr;
    PartPlace place;
    std::string name;
    PartInfo part;
    std::uint32_t first = 0;
    std::uint32_t count = 0;
    StepRows rows;
  };

  std::mutex mu_;
  std::condition_variable wake_;  // a job handed over, or stop
  std::condition_variable done_;  // for wait()
  bool has_job_ = false;          // under mu_
  bool stop_ = false;             // under mu_
  Job job_;                       // written by the serving thread only while !busy_
  Outcome outcome_;               // under mu_
  std::atomic<bool> ready_{false};
  bool busy_ = false;  // the serving thread's
  int event_fd_ = -1;
  // The copied rows the job points into; kept between steps of a save, let go when it ends.
  std::vector<Key> keys_;
  std::vector<float> values_;
  std::vector<float> state_;
  std::thread thread_;
};

}  // namespace ferry::ps::detail
