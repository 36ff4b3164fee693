#include "daemon/session/parking.h"

#include <algorithm>

namespace ferry::daemon {

Parking::Parking(Sessions& sessions, Deadlines& deadlines, Counters& counters)
    : sessions_(sessions), deadlines_(deadlines), counters_(counters) {
  queue_.reserve(1024);
}

void Parking::not_taken(ClientSession& c, Endpoint& ep, const Operation& op, const Attempt& at, Outcome o) {
  if (o.is_blocked()) {
    park(c, ep, op, at);
  } else if (o.is_failed()) {
    sessions_.complete(c, op.op, op.user_data, o.status);
  }
}

void Parking::park(ClientSession& c, Endpoint& ep, const Operation& op, Attempt at) {
  at.deadline_ns = deadlines_.waiting(at.call_deadline_ns);
  ep.parked.push_back(Parked{op, at});
  bump(counters_.parked);
  enlist(c, ep);
}

void Parking::refused(ClientSession& c, Endpoint& ep, const Operation& op, const Attempt& at) {
  auto pos = std::find_if(ep.parked.begin(), ep.parked.end(),
                          [&](const Parked& p) { return p.at.seq == 0 || p.at.seq > at.seq; });
  ep.parked.insert(pos, Parked{op, at});
  enlist(c, ep);
}

void Parking::enlist(ClientSession& c, Endpoint& ep) {
  if (ep.in_retry_list) return;
  ep.in_retry_list = true;
  queue_.push_back(EndpointRef{c.id(), ep.id});
}

std::size_t Parking::retry() {
  if (queue_.empty()) return 0;
  std::size_t progress = 0;
  const std::uint64_t now = deadlines_.now();
  for (bool moved = true; moved;) {
    moved = false;
    const std::size_t n = queue_.size();
    std::size_t i = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const auto at = [&] { return queue_.begin() + static_cast<std::ptrdiff_t>(i); };
      const EndpointRef ref = *at();
      ClientSession* c = sessions_.find(ref.client);
      Endpoint* ep = c != nullptr ? c->find_endpoint(ref.endpoint) : nullptr;
      if (ep == nullptr) {
        queue_.erase(at());  // keeps the others' order (no swap-remove)
        continue;
      }
      if (ep->parked.empty()) {
        ep->in_retry_list = false;
        queue_.erase(at());
        continue;
      }
      Parked& p = ep->parked.front();
      Outcome o = ep->sink->offer(*c, *ep, p.op, p.at);
      if (o.is_blocked()) {
        if (now < p.at.deadline_ns) {
          ++i;  // still waiting: keeps its place in the queue
          continue;
        }
        bump(counters_.timeouts);
        ep->sink->given_up(*ep, p.at);
        o = Outcome::failed(Status::Timeout);
      }
      if (o.is_failed()) sessions_.complete(*c, p.op.op, p.op.user_data, o.status);
      ep->parked.pop_front();
      ++progress;
      moved = true;
      if (ep->parked.empty()) {
        ep->in_retry_list = false;
        queue_.erase(at());
      } else {  // had its turn: to the back of the queue
        std::rotate(at(), at() + 1, queue_.end());
      }
    }
  }
  return progress;
}

void Parking::cancel(ClientSession& c, Endpoint& ep) {
  // Everything waiting on it completes first, with Cancelled.
  for (const Parked& p : ep.parked) sessions_.complete(c, p.op.op, p.op.user_data, Status::Cancelled);
  ep.parked.clear();
  const std::uint32_t cid = c.id(), eid = ep.id;
  std::erase_if(queue_, [&](const EndpointRef& r) { return r.client == cid && r.endpoint == eid; });
  ep.in_retry_list = false;
}

void Parking::client_gone(std::uint32_t client) {
  // Its waiting sends/calls have nobody to complete to; deliveries waiting
  // for it fail with ServiceGone when offered again (its services are gone).
  std::erase_if(queue_, [client](const EndpointRef& r) { return r.client == client; });
}

}  // namespace ferry::daemon
