#include "daemon/session/dispatch.h"

#include "daemon/engines/forwarder.h"
#include "daemon/engines/open_router.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

namespace ferry::daemon {

Dispatcher::Dispatcher(const Config& config, Sessions& sessions, Parking& parking, Deadlines& deadlines,
                       LocalDelivery& local, Calls& calls, RemoteSender& remote, OpenRouter& router,
                       Forwarder& forwarder, Counters& counters)
    : sessions_(sessions),
      parking_(parking),
      deadlines_(deadlines),
      local_(local),
      calls_(calls),
      remote_(remote),
      router_(router),
      forwarder_(forwarder),
      counters_(counters),
      call_timeout_ms_(config.call_timeout_ms) {}

std::size_t Dispatcher::poll(ClientSession& c) {
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
    sessions_.doom(c);
    return 1;
  }
  // The two entries every message costs, a Send and the receiver's quiet
  // ReleaseRx, on a short path (parse_hot); the rest through dispatch().
  std::uint32_t hot = 0, released = 0;
  Operation op;
  for (std::uint32_t i = 0; i < n; ++i) {
    const shm::SqEntry& e = batch[i];
    if (!parse_hot(e, c.bounds, op)) {
      dispatch(c, e);
      continue;
    }
    ++hot;
    if (op.quiet && c.rx.free(op.offset) == Status::Ok) {
      ++released;  // a live block of this client's rx arena: done, and nothing to say
      continue;
    }
    ++c.outstanding;
    if (op.op == shm::Op::Send) {
      send(c, op);
    } else {
      release(c, op);  // says why not, or that it went
    }
  }
  if (hot != 0) bump(counters_.ops_submitted, hot);
  if (released != 0) bump(counters_.ops_completed, released);
  return n;
}

void Dispatcher::dispatch(ClientSession& c, const shm::SqEntry& e) {
  using shm::Op;
  bump(counters_.ops_submitted);
  ++c.outstanding;
  Operation op;
  const Reject r = parse_operation(e, c.bounds, call_timeout_ms_, op);
  if (r != Reject::None) {
    bump(counters_.bad_requests);
    spdlog::debug("client {}: rejected op {} ({})", c.id(), e.op, to_string(r));
    sessions_.complete(c, op.op, op.user_data, Status::BadRequest);
    return;
  }
  switch (op.op) {
    case Op::Nop: sessions_.complete(c, Op::Nop, op.user_data, Status::Ok); break;
    case Op::Serve: local_.serve(c, op); break;
    case Op::Unserve: local_.unserve(c, op); break;
    case Op::Open: router_.open(c, op); break;
    case Op::Close: close(c, op); break;
    case Op::Send:
    case Op::Call: send(c, op); break;
    case Op::Reply: calls_.reply(c, op); break;
    case Op::ReleaseRx: release(c, op); break;
  }
}

void Dispatcher::run_forwarded(ClientSession& shadow, const Operation& op) {
  switch (op.op) {
    case shm::Op::Close: close(shadow, op); break;
    case shm::Op::Send:
    case shm::Op::Call: send(shadow, op); break;
    default: sessions_.complete(shadow, op.op, op.user_data, Status::BadRequest); break;  // never handed over
  }
}

void Dispatcher::close(ClientSession& c, const Operation& op) {
  Endpoint* ep = c.find_endpoint(op.handle);
  if (ep == nullptr) {
    sessions_.complete(c, shm::Op::Close, op.user_data, Status::EndpointClosed);
    return;
  }
  if (ep->forward_engine != kNoEngine) {
    // Its ops run on another engine: the Close too, answered from there.
    forwarder_.close(c, *ep, op);
    c.remove_endpoint(ep->id);
    return;
  }
  if (ep->is_remote()) remote_.close(c, *ep);
  // Everything in flight on it completes first, with Cancelled.
  parking_.cancel(c, *ep);
  calls_.caller_closed(c, ep->id);
  c.remove_endpoint(ep->id);
  sessions_.complete(c, shm::Op::Close, op.user_data, Status::Ok);
}

void Dispatcher::send(ClientSession& c, const Operation& op) {
  Endpoint* ep = c.find_endpoint(op.handle);
  if (ep == nullptr) {
    sessions_.complete(c, op.op, op.user_data, Status::EndpointClosed);
    return;
  }
  // A local Call's timeout counts from here: time parked counts (a remote
  // one's counts at the serving daemon).
  Attempt at;
  if (op.is_call() && !ep->is_remote()) at.call_deadline_ns = deadlines_.after(op.timeout_ms);
  parking_.submit(c, *ep, op, at);
}

void Dispatcher::release(ClientSession& c, const Operation& op) {
  const Status s = c.rx.free(op.offset);
  if (s != Status::Ok) bump(counters_.bad_requests);
  if (s == Status::Ok && op.quiet) {
    if (c.outstanding != 0) --c.outstanding;
    bump(counters_.ops_completed);
    return;
  }
  sessions_.complete(c, shm::Op::ReleaseRx, op.user_data, s);
}

}  // namespace ferry::daemon
