// The engine loop. One turn: take control commands, pull a bounded batch from
// every client's SQ, retry parked deliveries, flush completions; when turns
// find nothing to do for the spin budget (spin_policy.h), go to sleep on the
// doorbells.
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cassert>
#include <chrono>
#include <cstdlib>

#include "daemon/engine.h"
#include "daemon/mono_clock.h"
#include "daemon/spin_policy.h"

namespace ferry::daemon {

void Engine::assert_owner() const noexcept {
  if constexpr (FERRY_DEBUG_CHECKS) {
    if (std::this_thread::get_id() != owner_) {
      spdlog::critical("engine object touched off the engine thread");
      std::abort();
    }
  }
}

void Engine::run() {
  owner_ = std::this_thread::get_id();
  SpinPolicy spin(config_.engine_spin_us, config_.engine_spin_inflight_us);
  std::uint64_t idle_since = mono_ns();
  bool after_work = false;  // the idle period began with a turn that did work
  // The stretch awaits answers (SpinPolicy::awaits_answers): since when.
  bool awaiting = false;
  std::uint64_t awaiting_since = 0;
  while (!stop_) {
    turn_ns_ = mono_ns();
    std::size_t work = drain_commands();
    work += poll_peers();  // peer daemons: handshakes, heartbeats, their traffic
    answer_snapshot_request();
    for (ClientSession* c : order_) work += poll_submissions(*c);
    work += retry_parked();
    work += retry_staged();
    work += flush_answers();
    work += expire_calls();
    flush_completions();
    reap_doomed();
    flush_events();
    const bool answers_due = calls_.size() != 0 || remote_ops_.size() != 0;
    if (work != 0) {
      if (awaiting) spin.record_wait(turn_ns_ - awaiting_since);
      awaiting = false;
      idle_since = turn_ns_;
      after_work = true;
      continue;
    }
    const bool awaits = SpinPolicy::awaits_answers(after_work, answers_due);
    if (awaits && !awaiting) {
      awaiting = true;  // until work comes, through any sleeps
      awaiting_since = idle_since;
    }
    if (turn_ns_ - idle_since >= spin.budget_ns(after_work, answers_due)) {
      if (awaits && !spin.spin_pays()) bump(counters_.spin_skips);
      sleep_until_work();
      idle_since = mono_ns();
      after_work = false;
    } else {
      // Spinning. The work we wait for is usually another process's turn
      // (a client answering, the peer's server replying); where processes
      // outnumber cores it may be runnable on this very CPU, queued behind
      // the spin. Yield so it runs now: costs one syscall when the CPU is
      // otherwise idle, saves a scheduler slice when it is not.
      ::sched_yield();
    }
  }
  // Stop: detach everyone so sessions unmap in an orderly way, then say
  // Goodbye to every peer.
  while (!order_.empty()) detach(order_.back()->id());
  peers_->close_all();
  for (int i = 0; i < 8; ++i) peers_->poll(mono_ns());  // lets the Goodbyes and closes go out
}

std::size_t Engine::drain_commands() {
  std::size_t n = 0;
  EngineCommand cmd;
  while (commands_.pop(cmd)) {
    ++n;
    switch (cmd.kind) {
      case EngineCommand::Kind::Attach: adopt(cmd.session); break;
      case EngineCommand::Kind::Detach: detach(cmd.client_id); break;
      case EngineCommand::Kind::Stop: stop_ = true; break;
    }
  }
  return n;
}

std::size_t Engine::poll_submissions(ClientSession& c) {
  assert_owner();
  // Back-pressure on this client only: nothing new while completions owed to
  // it could not all be posted.
  if (c.doomed || !c.overflow.empty()) return 0;
  const std::uint32_t room = c.cq.capacity() - std::min(c.outstanding, c.cq.capacity());
  const std::uint32_t max = std::min(room, kSqBatch);
  if (max == 0) return 0;
  shm::SqEntry batch[kSqBatch];
  const std::uint32_t n = c.sq.pop_batch(batch, max);
  if (c.sq.corrupt()) {
    spdlog::warn("client {} ({}): submission ring indices corrupt; detaching it", c.id(), c.info().name);
    bump(counters_.corrupt_rings);
    c.doomed = true;
    return 1;
  }
  for (std::uint32_t i = 0; i < n; ++i) dispatch(c, batch[i]);
  return n;
}

void Engine::dispatch(ClientSession& c, const shm::SqEntry& e) {
  using shm::Op;
  bump(counters_.ops_submitted);
  ++c.outstanding;
  const Reject r = validate_entry(e, c.bounds);
  if (r != Reject::None) {
    bump(counters_.bad_requests);
    spdlog::debug("client {}: rejected op {} ({})", c.id(), e.op, to_string(r));
    complete(c, static_cast<Op>(e.op <= shm::kMaxOp ? e.op : 0), e.user_data, Status::BadRequest);
    return;
  }
  switch (static_cast<Op>(e.op)) {
    case Op::Nop: complete(c, Op::Nop, e.user_data, Status::Ok); break;
    case Op::Serve: op_serve(c, e); break;
    case Op::Unserve: op_unserve(c, e); break;
    case Op::Open: op_open(c, e); break;
    case Op::Close: op_close(c, e); break;
    case Op::Send:
    case Op::Call: op_send_or_call(c, e); break;
    case Op::Reply: op_reply(c, e); break;
    case Op::ReleaseRx: op_release(c, e); break;
  }
}

void Engine::reap_doomed() {
  for (std::size_t i = 0; i < order_.size();) {
    if (order_[i]->doomed) {
      std::uint32_t id = order_[i]->id();
      detach(id);  // erases order_[i]
      unsent_events_.push_back(id);
    } else {
      ++i;
    }
  }
}

void Engine::sleep_until_work() {
  // Dekker handshake per client (ring.h): announce, then re-check.
  bool all_idle = peers_->prepare_to_sleep();
  for (ClientSession* c : order_) {
    if (!c->sq.prepare_to_sleep()) all_idle = false;
  }
  if (all_idle && commands_.read_available() == 0) {
    // Parked deliveries and CQ overflows wait for room that frees without a
    // doorbell (the client reading its CQ), so they need a periodic look.
    bool pending = !parked_endpoints_.empty() || !unsent_events_.empty() || !staged_.empty() || !held_answers_.empty();
    for (ClientSession* c : order_) pending = pending || !c->overflow.empty();
    // Channels need their heartbeats and deadlines looked at even when quiet.
    int timeout = pending ? kBusyPollMs : peers_->channel_count() != 0 ? kPeerTickMs : -1;
    const int deadline = ms_until_deadline(mono_ns());
    if (deadline >= 0 && (timeout < 0 || deadline < timeout)) timeout = deadline;
    bump(counters_.engine_sleeps);
    epoll_event evs[64];
    int n = ::epoll_wait(epoll_fd_, evs, 64, timeout);
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.u64 == kTransportTag) {
        // Level-triggered: poll_peers() on the next turn consumes it.
      } else if (evs[i].data.u64 == 0) {
        std::uint64_t v;
        [[maybe_unused]] auto r = ::read(wake_fd_, &v, sizeof(v));
      }
      // A client's SQ doorbell (edge-triggered, never read: engine.cpp
      // adopt): the wake itself is the news; poll_submissions looks.
    }
  }
  for (ClientSession* c : order_) c->sq.woke_up();
}

}  // namespace ferry::daemon
