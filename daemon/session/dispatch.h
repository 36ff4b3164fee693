// The submission path: a bounded batch from one client's SQ per turn, each
// entry parsed and checked once (operation.h) and handed to the component
// that owns it: Serve/Unserve and local Opens to the local delivery, remote
// Opens to the remote sender, Sends and Calls to their endpoint's sink
// through parking, Replies to the calls. A bad entry completes BadRequest
// and nothing else happens. Engine thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "daemon/config/config.h"
#include "daemon/counters.h"
#include "daemon/engines/target.h"
#include "daemon/loop/deadlines.h"
#include "daemon/remote/remote_sender.h"
#include "daemon/serve/calls.h"
#include "daemon/serve/local_delivery.h"
#include "daemon/session/parking.h"
#include "daemon/session/sessions.h"

namespace ferry::daemon {

class OpenRouter;
class Forwarder;

class Dispatcher {
 public:
  Dispatcher(const Config& config, Sessions& sessions, Parking& parking, Deadlines& deadlines, LocalDelivery& local,
             Calls& calls, RemoteSender& remote, OpenRouter& router, Forwarder& forwarder, Counters& counters);

  // Takes what `c` submitted, up to a batch whose completions fit its CQ.
  // Returns the entries taken (1 for a corrupt ring: `c` is doomed).
  std::size_t poll(ClientSession& c);
  // An op another engine handed over (Close, Send, Call) on a shadow
  // (engines/forwarder.h): checked there already.
  void run_forwarded(ClientSession& shadow, const Operation& op);

 private:
  void dispatch(ClientSession& c, const shm::SqEntry& e);
  void close(ClientSession& c, const Operation& op);
  void send(ClientSession& c, const Operation& op);
  void release(ClientSession& c, const Operation& op);

  Sessions& sessions_;
  Parking& parking_;
  Deadlines& deadlines_;
  LocalDelivery& local_;
  Calls& calls_;
  RemoteSender& remote_;
  OpenRouter& router_;
  Forwarder& forwarder_;
  Counters& counters_;
  std::uint32_t call_timeout_ms_;  // a Call's timeout when it gives none
};

}  // namespace ferry::daemon
