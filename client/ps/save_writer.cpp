#include "client/ps/save_writer.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <system_error>

namespace ferry::ps::detail {

std::size_t staged_bytes(const StepRows& rows, std::uint32_t dim) noexcept {
  const std::size_t per_row = (rows.keys != nullptr ? 8 : 0) + 4 * std::size_t{dim} * (rows.state != nullptr ? 2 : 1);
  return static_cast<std::size_t>(rows.rows) * per_row;
}

SaveWriter::~SaveWriter() {
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

bool SaveWriter::submit(TableSaver& saver, const PartPlace& place, std::string_view name, const PartInfo& part,
                        std::uint32_t first, std::uint32_t count, const StepRows& rows) noexcept {
  const std::size_t n = rows.rows;
  const std::size_t width = std::size_t{part.spec->dim} * n;
  try {
    // The rows as they are now: the serving thread changes them again as soon as this returns.
    keys_.assign(rows.keys, rows.keys == nullptr ? nullptr : rows.keys + n);
    values_.assign(rows.values, rows.values == nullptr ? nullptr : rows.values + width);
    state_.assign(rows.state, rows.state == nullptr ? nullptr : rows.state + width);
    std::lock_guard<std::mutex> lock(mu_);
    job_.saver = &saver;
    job_.place = place;
    job_.name.assign(name);
    job_.part = part;
    job_.first = first;
    job_.count = count;
    job_.rows = StepRows{rows.keys == nullptr ? nullptr : keys_.data(), values_.data(),
                         rows.state == nullptr ? nullptr : state_.data(), rows.rows};
    has_job_ = true;
  } catch (const std::bad_alloc&) {
    return false;
  }
  busy_ = true;
  wake_.notify_one();
  return true;
}

void SaveWriter::run() noexcept {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return has_job_ || stop_; });
    if (!has_job_) return;  // stopping, and no step waits
    lock.unlock();
    Outcome out;
    out.status = job_.saver->write(job_.place, job_.name, job_.part, job_.first, job_.count, job_.rows, &out.written);
    lock.lock();
    has_job_ = false;
    outcome_ = out;
    ready_.store(true, std::memory_order_release);
    done_.notify_all();
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t w = ::write(event_fd_, &one, sizeof one);  // a counter: it cannot be full
  }
}

void SaveWriter::wait() noexcept {
  if (!busy_) return;
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return ready_.load(std::memory_order_acquire); });
}

SaveWriter::Outcome SaveWriter::take() noexcept {
  std::uint64_t count = 0;
  [[maybe_unused]] const ssize_t r = ::read(event_fd_, &count, sizeof count);
  Outcome out;
  {
    // ready() (acquire) already orders this read after the writer's; the
    // lock costs once a step and keeps the hand-over plain to read and to check.
    std::lock_guard<std::mutex> lock(mu_);
    out = outcome_;
    ready_.store(false, std::memory_order_relaxed);
  }
  busy_ = false;
  if (out.status != PsStatus::Ok || out.written < job_.count) {
    // The save ended (its last step, or a failure): its copies are let go.
    for (auto* v : {&values_, &state_}) std::vector<float>().swap(*v);
    std::vector<Key>().swap(keys_);
  }
  return out;
}

}  // namespace ferry::ps::detail
