// Destroys QPs on a thread of its own, so that the engine never waits for
// one. ibv_destroy_qp may block: on Soft-RoCE a QP whose link had just gone
// down took 3 s to destroy (its last packets wait on neighbour resolution,
// which gives up after 3 s, and the QP lives until they are freed), and
// with the destroy on the engine every channel of the daemon stood still
// that long. A QP handed here is already out of the connection table (its
// CQEs are dropped as stale) and in the error state. Private to rdma/.
//
// Control path only: a lock and a vector are fine here.
#pragma once

#include <infiniband/verbs.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace ferry::transport::rdma {

class QpReaper {
 public:
  QpReaper() = default;
  ~QpReaper() { drain(); }
  QpReaper(const QpReaper&) = delete;
  QpReaper& operator=(const QpReaper&) = delete;

  // Queues `qp` for destruction (the thread starts with the first one).
  // Falls back to destroying it here when no thread can be started.
  void destroy(ibv_qp* qp) noexcept;
  // Destroys everything queued and stops the thread; the CQ, SRQ and PD the
  // QPs used may be destroyed after it returns. destroy() may start it again.
  void drain() noexcept;

 private:
  void run() noexcept;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<ibv_qp*> queue_;  // guarded by mutex_
  bool stop_ = false;           // guarded by mutex_
  std::thread thread_;          // touched by the owner thread only
};

}  // namespace ferry::transport::rdma
