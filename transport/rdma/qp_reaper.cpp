// QpReaper (the header).
#include "transport/rdma/qp_reaper.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <system_error>

namespace ferry::transport::rdma {

namespace {

void destroy_now(ibv_qp* qp) noexcept {
  const std::uint32_t qpn = qp->qp_num;
  const auto t0 = std::chrono::steady_clock::now();
  if (ibv_destroy_qp(qp) != 0) spdlog::warn("rdma: destroying QP {} failed", qpn);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  if (ms > 100) spdlog::info("rdma: destroying QP {} took {} ms (off the engine thread)", qpn, ms);
}

}  // namespace

void QpReaper::destroy(ibv_qp* qp) noexcept {
  if (qp == nullptr) return;
  try {
    {
      const std::lock_guard lock(mutex_);
      queue_.push_back(qp);
    }
    if (!thread_.joinable()) {
      {
        const std::lock_guard lock(mutex_);
        stop_ = false;
      }
      thread_ = std::thread([this] { run(); });
    }
    wake_.notify_one();
  } catch (const std::exception& e) {  // no memory or no thread: the engine waits this once
    spdlog::warn("rdma: no QP reaper ({}); destroying QP {} on the engine", e.what(), qp->qp_num);
    {
      const std::lock_guard lock(mutex_);
      std::erase(queue_, qp);
    }
    destroy_now(qp);
  }
}

void QpReaper::drain() noexcept {
  if (thread_.joinable()) {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  for (ibv_qp* qp : queue_) destroy_now(qp);  // the thread is gone: no lock needed
  queue_.clear();
}

void QpReaper::run() noexcept {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, nothing left
    ibv_qp* qp = queue_.back();
    queue_.pop_back();
    lock.unlock();
    destroy_now(qp);
    lock.lock();
  }
}

}  // namespace ferry::transport::rdma
