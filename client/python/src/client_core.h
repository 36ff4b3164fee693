// The state behind one Python ferry.Client: the libferry Client (owned by
// one thread at a time, so every use holds `mu`), the operations in flight
// keyed by user_data (so each OpDone reaches its own Handle, whichever
// thread collected it), deliveries not yet handed to Python, and the leases
// (buffers and deliveries) to invalidate when the client closes.
//
// Threads: a thread that waits drives progress: it polls under `mu`, then
// sleeps on the event fd *without* `mu` (so other threads submit and poll
// meanwhile) and without the GIL. One thread sleeps on the fd at a time;
// the others sleep on `cv`, which every poll that completed something
// signals. Nothing here touches a Python object: the GIL is never needed
// while `mu` is held, and `mu` is never waited for while the GIL is held
// (lock_from_python() releases the GIL first when `mu` is busy).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ferry/client.h"

namespace ferry::py {

using Clock = std::chrono::steady_clock;

// Memory a Python object lends out through the buffer protocol: a tx
// buffer, or a delivered message in the rx arena. The memory goes back
// (to the tx arena, or to the daemon) when the lease dies, never earlier:
// free() and release() only invalidate it. numpy.frombuffer keeps the
// Python object, not a view, so an array made that way stays over
// memory nobody else is given until the array is gone.
struct Lease {
  virtual ~Lease() = default;
  int exports = 0;       // live buffer-protocol views (changed with the GIL held)
  int in_flight = 0;     // operations using it (changed under the core's mu)
  bool invalid = false;  // freed, released, or the client closed: no new views or uses
};

struct OpState {
  OpKind op = OpKind::Nop;
  bool done = false;
  Status status = Status::Ok;
  std::uint32_t length = 0;
  std::uint32_t handle = 0;
  std::shared_ptr<Lease> request;  // kept in flight until done
  std::shared_ptr<Lease> response;
};

struct ClientCore;

struct BufferLease final : Lease {
  std::shared_ptr<ClientCore> core;
  Buffer block;            // as allocated (what free() takes)
  std::uint32_t size = 0;  // what the caller asked for: the Python length
  Buffer view() const noexcept { return Buffer{block.data, size, block.offset}; }
  ~BufferLease() override;  // hands the block back to the tx arena
};

struct DeliveryLease final : Lease {
  std::shared_ptr<ClientCore> core;
  Completion delivery;
  ~DeliveryLease() override;  // hands the delivery back to the daemon
};

struct ClientCore {
  std::mutex mu;
  std::condition_variable cv;
  std::unique_ptr<Client> client;   // null once closed
  std::unique_ptr<Client> retired;  // closed: detached, still mapped until the last lease is gone
  bool sleeping = false;            // a thread sleeps on the event fd
  std::uint64_t next_user_data = 1;
  std::uint64_t completed = 0;  // operations completed so far (Client.wait's "something happened")
  std::unordered_map<std::uint64_t, std::shared_ptr<OpState>> ops;
  std::deque<Completion> deliveries;
  std::vector<std::weak_ptr<Lease>> leases;
  int event_fd = -1;
  bool busy_poll = false;
  // Blocks and deliveries of dead leases. A lease may die anywhere (under
  // mu, without the GIL: the last reference can be an OpState's), so it
  // only queues here; the next call under mu hands them back.
  std::mutex reclaim_mu;
  std::vector<Buffer> reclaim_blocks;
  std::vector<Completion> reclaim_deliveries;

  // Hands back what dead leases queued; caller holds mu.
  void reclaim_locked();

  // Collects every completion there is (poll until empty); caller holds mu.
  // True when anything completed.
  bool pump_locked();
  // Whether the daemon hung up on this (open) client; caller holds mu.
  bool daemon_gone_locked() const { return client && client->state() == Status::DaemonGone; }
  // Completes every operation in flight with `why` (close, daemon gone); caller holds mu.
  void fail_all_locked(Status why);
  // Waits without the GIL until pred() (checked under mu) or the deadline;
  // returns pred()'s last value.
  template <typename Pred>
  bool wait_until(Pred pred, Clock::time_point deadline);
  // Drops dead lease pointers now and then; caller holds mu.
  void track_locked(const std::shared_ptr<Lease>& lease);
};

// Locks `m` from a thread that holds the GIL, never blocking with the GIL held.
std::unique_lock<std::mutex> lock_from_python(std::mutex& m);

// The driving protocol described above; pred runs under mu.
void sleep_on_fd(ClientCore& c, std::unique_lock<std::mutex>& lk, Clock::time_point deadline);

template <typename Pred>
bool ClientCore::wait_until(Pred pred, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lk(mu);
  for (;;) {
    if (pred()) return true;
    if (!client) return pred();
    pump_locked();
    if (pred()) return true;
    if (Clock::now() >= deadline) return false;
    sleep_on_fd(*this, lk, deadline);
  }
}

}  // namespace ferry::py
