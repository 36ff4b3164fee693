// The one place Sends and Calls wait when their receiver has no room: the
// rx arena or CQ of a local server (serve/local_delivery.h), or a send
// window, a back-off after a refusal, or a full lane toward a peer
// (remote/remote_sender.h). Ops wait on their endpoint in order (FIFO), so
// messages on one endpoint keep their order whatever the kind of sink, and
// are offered again every turn until they go or their deadline passes
// (then Timeout).
//
// Fair release: endpoints with waiting ops form a queue in waiting order.
// Each pass offers every endpoint one try of its front op; one that moved
// an op goes to the back, one still blocked keeps its place, so when a send
// window frees a slot the endpoint that has waited longest takes it instead
// of whichever sits first taking every slot. Passes repeat while any op
// moves, so nothing is left that could go now. Engine thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/counters.h"
#include "daemon/loop/deadlines.h"
#include "daemon/session/sessions.h"

namespace ferry::daemon {

class Parking {
 public:
  Parking(Sessions& sessions, Deadlines& deadlines, Counters& counters);

  // A Send or Call of `c` on `ep`: offered to the endpoint's sink now,
  // unless older ops of the endpoint wait (then it waits behind them).
  // Inline: the common case is one offer that goes.
  void submit(ClientSession& c, Endpoint& ep, const Operation& op, Attempt at) {
    if (!ep.parked.empty()) {  // keep order behind what is already waiting
      park(c, ep, op, at);
      return;
    }
    const Outcome o = ep.sink->offer(c, ep, op, at);
    if (!o.is_done()) not_taken(c, ep, op, at, o);
  }
  // A remote op the peer refused Busy waits again (at.seq set): ahead of
  // the endpoint's ops never sent, in first-send order.
  void refused(ClientSession& c, Endpoint& ep, const Operation& op, const Attempt& at);
  // Offers every waiting op its turn; returns how many went or gave up.
  std::size_t retry();
  // The endpoint closes: its waiting ops complete Cancelled.
  void cancel(ClientSession& c, Endpoint& ep);
  // A client detached: nothing of it waits any more.
  void client_gone(std::uint32_t client);
  bool empty() const noexcept { return queue_.empty(); }

 private:
  void park(ClientSession& c, Endpoint& ep, const Operation& op, Attempt at);
  void not_taken(ClientSession& c, Endpoint& ep, const Operation& op, const Attempt& at, Outcome o);
  void enlist(ClientSession& c, Endpoint& ep);

  Sessions& sessions_;
  Deadlines& deadlines_;
  Counters& counters_;
  struct EndpointRef {
    std::uint32_t client;
    std::uint32_t endpoint;
  };
  std::vector<EndpointRef> queue_;  // endpoints with waiting ops, in waiting order
};

}  // namespace ferry::daemon
