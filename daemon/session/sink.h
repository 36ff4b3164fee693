// Where an endpoint's Sends and Calls go, bound once at Open: the local
// delivery (a service of this daemon) or the remote sender (a service
// behind a channel). Parking and the submission path offer ops through it
// without asking which kind of endpoint they hold.
#pragma once

#include <cstdint>

#include "daemon/session/operation.h"
#include "daemon/session/outcome.h"

namespace ferry::daemon {

class ClientSession;
struct Endpoint;

// What one try of an op carries from the last: set when it first waits,
// kept while it is offered again.
struct Attempt {
  std::uint64_t deadline_ns = 0;       // given up then (Timeout); 0 until it first waits
  std::uint64_t call_deadline_ns = 0;  // a local Call's timeout, from its submission (0: none)
  std::uint64_t seq = 0;               // remote: its endpoint sequence number once sent (0: never sent)
  bool stall_counted = false;          // remote: already counted in window_stalls (once per op)
};

class Sink {
 public:
  // Hands a Send or Call of `c` on `ep` to its receiver, or says why not
  // now (blocked: offered again later) or not at all (failed).
  virtual Outcome offer(ClientSession& c, Endpoint& ep, const Operation& op, Attempt& at) = 0;
  // An op that waited was given up (its deadline passed) and completed
  // Timeout: a sink that numbered it (at.seq) learns the number is free.
  virtual void given_up(Endpoint& ep, const Attempt& at) noexcept {
    (void)ep;
    (void)at;
  }

 protected:
  ~Sink() = default;
};

}  // namespace ferry::daemon
