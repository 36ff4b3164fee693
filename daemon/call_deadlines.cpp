// A call's timeout: how long it may wait at the server's daemon, from its
// arrival there to the server's reply (the Call's own timeout_ms, else
// call-timeout-ms; 0 = none). Time spent waiting for room at the server
// (parked, staged) or being READ counts: a call still waiting then fails
// Timeout there (delivery.cpp, remote_serving.cpp).
//
// The daemon of the server enforces it, because only it knows when the
// server got the request and only it can stop the reply: past the deadline
// a local caller's Call completes Timeout, a peer caller gets a Response
// with status Timeout (on the call's lane, after any WRITE already posted
// into its response buffer), and the server's late Reply gets CallerGone.
//
// A calling daemon only keeps a backstop for a remote call: no answer by
// timeout + 2 x peer-timeout + 1 s means the peer lost it (lanes are
// reliable, so this is a fault, not a slow server). The channel is failed
// then: that is the one way to be sure the peer will not still READ or
// WRITE the client's buffers; the call completes Timeout, its neighbours
// PeerReset, and the client may re-open.
//
// Both tables are swept when the earliest deadline passes, at most once
// per kSweepNs: no per-call timer, no allocation.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>

#include "daemon/engine.h"
#include "daemon/mono_clock.h"

namespace ferry::daemon {

namespace {
constexpr std::uint64_t kSweepNs = 5'000'000;  // deadline granularity
constexpr std::uint64_t kNone = ~std::uint64_t{0};
}  // namespace

std::uint32_t Engine::call_timeout_of(const shm::SqEntry& e) const noexcept {
  return e.timeout_ms != 0 ? e.timeout_ms : config_.call_timeout_ms;
}

std::uint64_t Engine::deadline_after(std::uint32_t timeout_ms) noexcept {
  if (timeout_ms == 0) return 0;  // no clock read for calls without one (and for every Send)
  const std::uint64_t at = now_ns() + std::uint64_t{timeout_ms} * 1'000'000;
  note_deadline(at);
  return at;
}

std::uint64_t Engine::waiting_deadline(std::uint64_t call_deadline_ns) const noexcept {
  const std::uint64_t delivery = now_ns() + delivery_timeout_ns_;
  return call_deadline_ns != 0 ? std::min(delivery, call_deadline_ns) : delivery;
}

void Engine::note_deadline(std::uint64_t at_ns) noexcept {
  if (at_ns != 0) next_deadline_ns_ = std::min(next_deadline_ns_, at_ns);
}

std::uint64_t Engine::answer_backstop(std::uint32_t timeout_ms, std::uint64_t now_ns) noexcept {
  if (timeout_ms == 0) return 0;
  const std::uint64_t grace_ms = 2 * std::uint64_t{config_.peer_timeout_ms} + 1000;
  const std::uint64_t at = now_ns + (timeout_ms + grace_ms) * 1'000'000;
  note_deadline(at);
  return at;
}

int Engine::ms_until_deadline(std::uint64_t now_ns) const noexcept {
  if (next_deadline_ns_ == kNone) return -1;
  const std::uint64_t at = std::max(next_deadline_ns_, last_deadline_sweep_ns_ + kSweepNs);
  if (at <= now_ns) return 0;
  return static_cast<int>(std::min<std::uint64_t>((at - now_ns + 999'999) / 1'000'000, INT_MAX));
}

std::size_t Engine::expire_calls() {
  if (next_deadline_ns_ == kNone) return 0;
  const std::uint64_t now = now_ns();
  if (now < next_deadline_ns_ || now < last_deadline_sweep_ns_ + kSweepNs) return 0;
  last_deadline_sweep_ns_ = now;
  std::uint64_t next = kNone;
  std::size_t expired = 0;
  // Calls our servers hold. The record stays (the server still holds the
  // token); caller_gone makes its Reply complete CallerGone.
  calls_.sweep([&](PendingCall& call) {
    if (call.deadline_ns == 0 || call.caller_gone) return false;
    if (now < call.deadline_ns) {
      next = std::min(next, call.deadline_ns);
      return false;
    }
    call.caller_gone = true;
    ++expired;
    bump(counters_.call_timeouts);
    if (call.remote_channel != 0) {
      wire::Header to;
      to.src_ep = call.remote_ep;
      to.token = call.remote_token;
      answer(call.remote_channel, call.lane, to, Status::Timeout);
    } else if (ClientSession* caller = client(call.caller)) {
      complete(*caller, shm::Op::Call, call.user_data, Status::Timeout);
    }
    return false;
  });
  // Our remote calls whose peer never answered.
  std::vector<std::uint32_t>& overdue = overdue_channels_;
  overdue.clear();
  remote_ops_.sweep([&](std::uint64_t token, peer::RemoteOp& op) {
    if (op.kind != peer::RemoteOpKind::Call || op.answer_by_ns == 0 || op.overdue) return false;
    if (now < op.answer_by_ns) {
      next = std::min(next, op.answer_by_ns);
      return false;
    }
    op.overdue = true;
    ++expired;
    spdlog::error(
        "channel {}: the peer never answered call {:#x} (timeout plus 2 x peer-timeout passed); failing "
        "the channel",
        op.channel, token);
    overdue.push_back(op.channel);
    return false;
  });
  std::sort(overdue.begin(), overdue.end());
  overdue.erase(std::unique(overdue.begin(), overdue.end()), overdue.end());
  for (std::uint32_t id : overdue) {
    if (peer::Channel* ch = peers_->find(id)) peers_->fail_channel(*ch, Status::Timeout, now);
  }
  next_deadline_ns_ = next;
  return expired;
}

}  // namespace ferry::daemon
