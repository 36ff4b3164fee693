#include "client/ps/save_writer.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <system_error>

namespace ferry::ps::detail {

namespace {

void signal(int fd) noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t w = ::write(fd, &one, sizeof one);  // a counter: it cannot fill up
}

template <typename T>
void let_go(std::vector<T>& v) noexcept {
  std::vector<T>().swap(v);
}

}  // namespace

SaveWriter::~SaveWriter() {
  if (busy_ && !ready()) cancel();
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  if (event_fd_ >= 0) ::close(event_fd_);
}

Error SaveWriter::start() {
  event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) return Error(Status::NoMemory, std::string("eventfd: ") + std::strerror(errno));
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    return Error(Status::NoMemory, std::string("cannot start the save writer: ") + e.what());
  }
  return {};
}

bool SaveWriter::begin(TableSaver& saver, const TableStore& store, const PartPlace& place, std::string_view name,
                       std::uint32_t first, std::uint32_t count, std::uint64_t rows) noexcept {
  const PartInfo part = part_info(store);
  const std::uint32_t dim = part.spec->dim;
  const bool keys = part.spec->kind == TableKind::Embedding;
  per_piece_ = piece_rows((keys ? 8 : 0) + std::size_t{4} * dim * (part.state ? 2 : 1));
  try {
    for (Piece& p : pieces_) {  // the same sizes for every step of a table: allocated once a save
      p.keys.resize(keys ? per_piece_ : 0);
      p.values.resize(per_piece_ * dim);
      p.state.resize(part.state ? per_piece_ * dim : 0);
      p.rows = 0;
      p.full = false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    saver_ = &saver;
    place_ = place;
    name_.assign(name);
    part_ = part;
    first_ = first;
    count_ = count;
    rows_ = rows;
    cancel_ = false;
    has_step_ = true;
  } catch (const std::bad_alloc&) {
    return false;
  }
  store_ = &store;
  copied_ = 0;
  fill_ = 0;
  busy_ = true;
  wake_.notify_one();
  turn();
  return true;
}

bool SaveWriter::piece_free() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return !pieces_[fill_].full;
}

void SaveWriter::turn() noexcept {
  if (!busy_) return;
  std::uint64_t signals = 0;
  [[maybe_unused]] const ssize_t r = ::read(event_fd_, &signals, sizeof signals);
  const std::size_t dim = part_.spec->dim;
  while (copied_ < rows_ && !ready() && piece_free()) {
    // Whole rows, their keys, values and state of one moment; the store's
    // vectors may have grown since the last piece, so the pointers are
    // taken again.
    Piece& p = pieces_[fill_];
    const std::uint64_t n = std::min(per_piece_, rows_ - copied_);
    const std::uint64_t row = first_ + copied_;
    if (!p.keys.empty()) std::memcpy(p.keys.data(), store_->row_keys(row), 8 * n);
    std::memcpy(p.values.data(), store_->row_values(row), 4 * n * dim);
    if (!p.state.empty()) std::memcpy(p.state.data(), store_->row_state(row), 4 * n * dim);
    {
      std::lock_guard<std::mutex> lock(mu_);
      p.rows = n;
      p.full = true;
    }
    wake_.notify_one();
    copied_ += n;
    fill_ ^= 1;
  }
}

void SaveWriter::run() noexcept {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return has_step_ || stop_; });
    if (!has_step_) return;  // stopping, and no step waits
    lock.unlock();
    const PsStatus st = write_step();
    lock.lock();
    has_step_ = false;
    outcome_ = Outcome{st, st == PsStatus::Ok ? static_cast<std::uint32_t>(rows_) : 0};
    ready_.store(true, std::memory_order_release);
    freed_.notify_all();
    signal(event_fd_);
  }
}

PsStatus SaveWriter::write_step() noexcept {
  if (const PsStatus st = saver_->begin_step(place_, name_, part_, first_); st != PsStatus::Ok) return st;
  unsigned next = 0;
  for (std::uint64_t written = 0; written < rows_; next ^= 1) {
    Piece& p = pieces_[next];
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return p.full || cancel_; });
      if (!p.full) {
        lock.unlock();
        saver_->cancel();
        return PsStatus::IoFailed;
      }
    }
    const StepRows rows{p.keys.empty() ? nullptr : p.keys.data(), p.values.data(),
                        p.state.empty() ? nullptr : p.state.data(), p.rows};
    if (const PsStatus st = saver_->append(rows, part_.spec->dim); st != PsStatus::Ok) return st;
    written += p.rows;
    {
      std::lock_guard<std::mutex> lock(mu_);
      p.full = false;
    }
    freed_.notify_all();
    signal(event_fd_);
  }
  return saver_->end_step(place_, part_, first_, count_, rows_);
}

void SaveWriter::finish() noexcept {
  while (busy_ && !ready()) {
    turn();
    std::unique_lock<std::mutex> lock(mu_);
    freed_.wait(lock,
                [this] { return ready_.load(std::memory_order_acquire) || (copied_ < rows_ && !pieces_[fill_].full); });
  }
}

void SaveWriter::cancel() noexcept {
  if (!busy_) return;
  std::unique_lock<std::mutex> lock(mu_);
  cancel_ = true;
  wake_.notify_one();
  freed_.wait(lock, [this] { return ready_.load(std::memory_order_acquire); });
}

SaveWriter::Outcome SaveWriter::take() noexcept {
  std::uint64_t signals = 0;
  [[maybe_unused]] const ssize_t r = ::read(event_fd_, &signals, sizeof signals);
  Outcome out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = outcome_;
    ready_.store(false, std::memory_order_relaxed);
  }
  busy_ = false;
  if (out.status != PsStatus::Ok || out.written < count_) {
    // The save ended (its last step, or a failure): its piece buffers are let go.
    for (Piece& p : pieces_) {
      let_go(p.keys);
      let_go(p.values);
      let_go(p.state);
    }
  }
  return out;
}

}  // namespace ferry::ps::detail
