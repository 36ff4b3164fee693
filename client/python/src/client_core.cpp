#include "client_core.h"

#include <poll.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <array>
#include <thread>

namespace ferry::py {

namespace {

constexpr std::size_t kBatch = 64;
// A sleeper wakes at least this often, so a thread waiting on cv notices a
// completion its sleeper missed (it cannot happen; this bounds the harm).
constexpr auto kSlice = std::chrono::milliseconds(50);

}  // namespace

std::unique_lock<std::mutex> lock_from_python(std::mutex& m) {
  std::unique_lock<std::mutex> lk(m, std::try_to_lock);
  if (!lk.owns_lock()) {
    pybind11::gil_scoped_release nogil;
    lk.lock();
  }
  return lk;
}

bool ClientCore::pump_locked() {
  if (!client) return false;
  reclaim_locked();
  std::array<Completion, kBatch> batch;
  bool any = false;
  for (;;) {
    const std::size_t n = client->poll(batch);
    for (std::size_t i = 0; i < n; ++i) {
      const Completion& c = batch[i];
      if (c.kind != Completion::Kind::OpDone) {
        deliveries.push_back(c);
        continue;
      }
      const auto it = ops.find(c.user_data);
      if (it == ops.end()) continue;  // not ours (a control op's leftover): nothing waits for it
      OpState& op = *it->second;
      op.done = true;
      op.status = c.status;
      op.length = c.length;
      op.handle = c.handle;
      if (op.request) --op.request->in_flight;
      if (op.response) --op.response->in_flight;
      op.request.reset();
      op.response.reset();
      ops.erase(it);
      ++completed;
    }
    if (n == 0) break;  // empty: the doorbell is armed, the fd can be slept on
    any = true;
  }
  if (any) cv.notify_all();
  return any;
}

void ClientCore::fail_all_locked(Status why) {
  for (auto& [id, op] : ops) {
    op->done = true;
    op->status = why;
    if (op->request) --op->request->in_flight;
    if (op->response) --op->response->in_flight;
    op->request.reset();
    op->response.reset();
  }
  ops.clear();
  cv.notify_all();
}

void ClientCore::track_locked(const std::shared_ptr<Lease>& lease) {
  if (leases.size() >= 64 && (leases.size() & (leases.size() - 1)) == 0)
    leases.erase(std::remove_if(leases.begin(), leases.end(), [](const auto& w) { return w.expired(); }), leases.end());
  leases.push_back(lease);
}

void sleep_on_fd(ClientCore& c, std::unique_lock<std::mutex>& lk, Clock::time_point deadline) {
  const auto until = std::min(deadline, Clock::now() + kSlice);
  if (c.sleeping || c.busy_poll) {
    // Another thread sleeps on the fd (it signals cv when it collects), or
    // a spinning client: poll again soon.
    if (c.busy_poll && !c.sleeping) {
      lk.unlock();
      std::this_thread::yield();
      lk.lock();
    } else {
      c.cv.wait_until(lk, until);
    }
    return;
  }
  c.sleeping = true;
  const int fd = c.event_fd;
  lk.unlock();
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
  pollfd p{fd, POLLIN, 0};
  ::poll(&p, 1, static_cast<int>(std::max<long long>(ms, 0)));
  lk.lock();
  c.sleeping = false;
  c.cv.notify_all();  // let a waiter take over the fd if this thread is done
}

BufferLease::~BufferLease() {
  if (!core) return;
  std::lock_guard<std::mutex> g(core->reclaim_mu);
  core->reclaim_blocks.push_back(block);
}

DeliveryLease::~DeliveryLease() {
  if (!core) return;
  std::lock_guard<std::mutex> g(core->reclaim_mu);
  core->reclaim_deliveries.push_back(delivery);
}

void ClientCore::reclaim_locked() {
  std::vector<Buffer> blocks;
  std::vector<Completion> deliveries_back;
  {
    std::lock_guard<std::mutex> g(reclaim_mu);
    if (reclaim_blocks.empty() && reclaim_deliveries.empty()) return;
    blocks.swap(reclaim_blocks);
    deliveries_back.swap(reclaim_deliveries);
  }
  if (!client) return;
  for (const Buffer& b : blocks) (void)client->free(b);
  for (const Completion& d : deliveries_back) client->release(d);
}

}  // namespace ferry::py
