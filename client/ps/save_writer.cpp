#include "client/ps/save_writer.h"

#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <iterator>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "ferry/mono_clock.h"

namespace ferry::ps::detail {

struct SaveWriter::Shared {
  struct Piece {
    std::vector<Key> keys;
    std::vector<float> values;
    std::vector<float> state;
    std::uint64_t rows = 0;
    bool full = false;  // under mu: copied, not yet written
  };

  ~Shared() {
    if (event_fd >= 0) ::close(event_fd);
  }

  std::mutex mu;
  std::condition_variable wake;   // to the writer: a step began, a piece is full, cancel, stop
  std::condition_variable freed;  // from the writer: a piece was freed, the step ended, it exited
  bool has_step = false;          // under mu
  bool cancel = false;            // under mu
  bool stop = false;              // under mu
  bool exited = false;            // under mu
  Outcome outcome;                // under mu
  std::atomic<bool> ready{false};
  // When the writer entered the filesystem call it is in (steady clock, ns); 0: in none.
  std::atomic<std::int64_t> call_since_ns{0};
  Piece pieces[2];
  int event_fd = -1;

  // The step, set by begin() before the writer is woken, then read by both.
  std::shared_ptr<TableSaver> saver;
  PartPlace place;
  std::string name;
  TableSpec spec;  // the table's, copied: the writer may outlive the shard
  PartInfo part;   // part.spec points at `spec`
  std::uint32_t first = 0;
  std::uint32_t count = 0;
  std::uint64_t rows = 0;
};

namespace {

using Shared = SaveWriter::Shared;

constexpr int kWriterNice = 10;

void signal(int fd) noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t w = ::write(fd, &one, sizeof one);  // a counter: it cannot fill up
}

std::int64_t now_ns() noexcept { return static_cast<std::int64_t>(mono_ns()); }

// Marks the writer as inside a filesystem call while it lives (SaveWriter::stalled()).
class InCall {
 public:
  explicit InCall(Shared& s) noexcept : s_(s) { s_.call_since_ns.store(now_ns(), std::memory_order_relaxed); }
  ~InCall() { s_.call_since_ns.store(0, std::memory_order_relaxed); }
  InCall(const InCall&) = delete;
  InCall& operator=(const InCall&) = delete;

 private:
  Shared& s_;
};

template <typename T>
void let_go(std::vector<T>& v) noexcept {
  std::vector<T>().swap(v);
}

// The writer's part of one step: Ok, or why it stopped.
PsStatus write_step(Shared& s) noexcept {
  PsStatus st = PsStatus::Ok;
  {
    const InCall call(s);
    st = s.saver->begin_step(s.place, s.name, s.part, s.first);
  }
  if (st != PsStatus::Ok) return st;
  unsigned next = 0;
  for (std::uint64_t written = 0; written < s.rows; next ^= 1) {
    Shared::Piece& p = s.pieces[next];
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.wake.wait(lock, [&] { return p.full || s.cancel; });
      if (!p.full) {
        lock.unlock();
        const InCall call(s);
        s.saver->cancel();
        return PsStatus::IoFailed;
      }
    }
    const StepRows rows{p.keys.empty() ? nullptr : p.keys.data(), p.values.data(),
                        p.state.empty() ? nullptr : p.state.data(), p.rows};
    {
      const InCall call(s);
      st = s.saver->append(rows, s.spec.dim);
    }
    if (st != PsStatus::Ok) return st;
    written += p.rows;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      p.full = false;
    }
    s.freed.notify_all();
    signal(s.event_fd);
  }
  {
    // Cancelled with every piece written: the part is given up all the same.
    std::unique_lock<std::mutex> lock(s.mu);
    if (s.cancel) {
      lock.unlock();
      const InCall call(s);
      s.saver->cancel();
      return PsStatus::IoFailed;
    }
  }
  const InCall call(s);
  return s.saver->end_step(s.place, s.part, s.first, s.count, s.rows);
}

// The writer thread; `s` keeps what it touches alive however long it runs.
void run(std::shared_ptr<Shared> s) noexcept {
  // Below the serving thread: where the cores are busy, the shard's
  // answers come first and the checkpoint takes what is left. (Linux gives
  // each thread its own nice value; raising it needs no privilege.)
  [[maybe_unused]] const int niced = ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kWriterNice);
  std::unique_lock<std::mutex> lock(s->mu);
  for (;;) {
    s->wake.wait(lock, [&] { return s->has_step || s->stop; });
    if (!s->has_step) break;  // stopping, and no step waits
    lock.unlock();
    const PsStatus st = write_step(*s);
    lock.lock();
    s->has_step = false;
    s->outcome = SaveWriter::Outcome{st, st == PsStatus::Ok ? static_cast<std::uint32_t>(s->rows) : 0};
    s->ready.store(true, std::memory_order_release);
    s->freed.notify_all();
    signal(s->event_fd);
  }
  s->saver.reset();  // its files are closed now, whoever else holds it
  s->exited = true;
  s->freed.notify_all();
}

}  // namespace

SaveWriter::SaveWriter() : s_(std::make_shared<Shared>()) {}

SaveWriter::~SaveWriter() {
  if (!thread_.joinable()) return;
  bool gone = !busy_ || ready() || (!stuck_ && cancel());
  std::unique_lock<std::mutex> lock(s_->mu);
  s_->stop = true;
  s_->wake.notify_one();
  if (gone) gone = s_->freed.wait_for(lock, kWriterPatience, [&] { return s_->exited; });
  lock.unlock();
  // A writer stuck in a system call ends on its own, on its share of the state.
  if (gone)
    thread_.join();
  else
    thread_.detach();
}

Error SaveWriter::start() {
  s_->event_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s_->event_fd < 0) return Error(Status::NoMemory, std::string("eventfd: ") + std::strerror(errno));
  try {
    thread_ = std::thread(run, s_);
  } catch (const std::system_error& e) {
    return Error(Status::NoMemory, std::string("cannot start the save writer: ") + e.what());
  }
  return {};
}

bool SaveWriter::ready() const noexcept { return s_->ready.load(std::memory_order_acquire); }

bool SaveWriter::stalled(std::chrono::milliseconds limit) const noexcept {
  if (!busy_ || ready()) return false;
  const std::int64_t since = s_->call_since_ns.load(std::memory_order_relaxed);
  return since != 0 && now_ns() - since > std::chrono::duration_cast<std::chrono::nanoseconds>(limit).count();
}
int SaveWriter::event_fd() const noexcept { return s_->event_fd; }

bool SaveWriter::begin(const std::shared_ptr<TableSaver>& saver, const TableStore& store, const PartPlace& place,
                       std::string_view name, std::uint32_t first, std::uint32_t count, std::uint64_t rows) noexcept {
  const PartInfo part = part_info(store);
  const std::uint32_t dim = part.spec->dim;
  const bool keys = part.spec->kind == TableKind::Embedding;
  per_piece_ = piece_rows((keys ? 8 : 0) + std::size_t{4} * dim * (part.state ? 2 : 1));
  Shared& s = *s_;
  try {
    for (Shared::Piece& p : s.pieces) {  // the same sizes for every step of a table: allocated once a save
      p.keys.resize(keys ? per_piece_ : 0);
      p.values.resize(per_piece_ * dim);
      p.state.resize(part.state ? per_piece_ * dim : 0);
      p.rows = 0;
      p.full = false;
    }
    std::lock_guard<std::mutex> lock(s.mu);
    s.saver = saver;
    s.place = place;
    s.name.assign(name);
    s.spec = *part.spec;
    s.part = part;
    s.part.spec = &s.spec;
    s.first = first;
    s.count = count;
    s.rows = rows;
    s.cancel = false;
    s.has_step = true;
  } catch (const std::bad_alloc&) {
    return false;
  }
  store_ = &store;
  copied_ = 0;
  fill_ = 0;
  busy_ = true;
  s.wake.notify_one();
  turn();
  return true;
}

bool SaveWriter::piece_free() noexcept {
  std::lock_guard<std::mutex> lock(s_->mu);
  return !s_->pieces[fill_].full;
}

void SaveWriter::turn() noexcept {
  if (!busy_) return;
  Shared& s = *s_;
  std::uint64_t signals = 0;
  [[maybe_unused]] const ssize_t r = ::read(s.event_fd, &signals, sizeof signals);
  const std::size_t dim = s.spec.dim;
  // Two pieces a turn at most (one per buffer), even where the writer frees
  // them as fast as they are copied: what a request behind this turn waits for.
  for (unsigned k = 0; k < std::size(s.pieces) && copied_ < s.rows && !ready() && piece_free(); ++k) {
    // Whole rows, their keys, values and state of one moment; the store's
    // vectors may have grown since the last piece, so the pointers are
    // taken again.
    Shared::Piece& p = s.pieces[fill_];
    const std::uint64_t n = std::min(per_piece_, s.rows - copied_);
    const std::uint64_t row = s.first + copied_;
    if (!p.keys.empty()) std::memcpy(p.keys.data(), store_->row_keys(row), 8 * n);
    std::memcpy(p.values.data(), store_->row_values(row), 4 * n * dim);
    if (!p.state.empty()) std::memcpy(p.state.data(), store_->row_state(row), 4 * n * dim);
    {
      std::lock_guard<std::mutex> lock(s.mu);
      p.rows = n;
      p.full = true;
    }
    s.wake.notify_one();
    copied_ += n;
    fill_ ^= 1;
  }
}

bool SaveWriter::finish(std::chrono::milliseconds stall) noexcept {
  constexpr std::chrono::milliseconds kLook{100};  // how often a stall is looked for
  Shared& s = *s_;
  while (busy_ && !ready()) {
    if (stall.count() != 0 && stalled(stall)) return false;
    turn();
    std::unique_lock<std::mutex> lock(s.mu);
    s.freed.wait_for(lock, kLook, [&] {
      return s.ready.load(std::memory_order_acquire) || (copied_ < s.rows && !s.pieces[fill_].full);
    });
  }
  return true;
}

bool SaveWriter::cancel(std::chrono::milliseconds patience) noexcept {
  if (!busy_) return true;
  Shared& s = *s_;
  std::unique_lock<std::mutex> lock(s.mu);
  s.cancel = true;
  s.wake.notify_one();
  stuck_ = !s.freed.wait_for(lock, patience, [&] { return s.ready.load(std::memory_order_acquire); });
  return !stuck_;
}

SaveWriter::Outcome SaveWriter::take() noexcept {
  Shared& s = *s_;
  std::uint64_t signals = 0;
  [[maybe_unused]] const ssize_t r = ::read(s.event_fd, &signals, sizeof signals);
  Outcome out;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    out = s.outcome;
    s.ready.store(false, std::memory_order_relaxed);
  }
  busy_ = false;
  if (out.status != PsStatus::Ok || out.written < s.count) {
    // The save ended (its last step, or a failure): its piece buffers are let go.
    for (Shared::Piece& p : s.pieces) {
      let_go(p.keys);
      let_go(p.values);
      let_go(p.state);
    }
  }
  return out;
}

}  // namespace ferry::ps::detail
