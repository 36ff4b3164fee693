// Ops that run on another engine (cross_msg.h says what crosses). On the
// client's own engine (origin) the Forwarder is the Sink of endpoints that
// another engine serves: it hands their Sends, Calls and Close over, makes
// the client's shadow there first, posts the completions that come back
// (an Open's with the origin's own endpoint id) and, when the client
// detaches, ends its shadows; the client's session stays retired until
// every one is freed. On the executing engine it is the ShadowSink: the
// shadow's completions and its end go back to the origin.
//
// Copies: none here. The executor reads the payload straight from the
// client's tx arena and writes a response straight into its buffer (the
// memory is the same mapping; the origin keeps it alive), so a message
// crossing engines is copied once, as between two clients of one engine.
// Engine thread only.
#pragma once

#include <cstdint>

#include "daemon/counters.h"
#include "daemon/engines/cross_link.h"
#include "daemon/session/sessions.h"
#include "daemon/session/sink.h"

namespace ferry::daemon {

class Forwarder final : public Sink, public ShadowSink {
 public:
  Forwarder(Sessions& sessions, Counters& counters);

  // Before the engine thread starts, with more than one engine.
  void attach(CrossRings& rings, std::uint32_t self) { link_ = CrossLink(rings, self); }
  CrossLink& link() noexcept { return link_; }
  const CrossLink& link() const noexcept { return link_; }
  std::uint32_t self() const noexcept { return link_.self(); }

  // ---- origin side ----
  // Runs Open `op` of `c` on engine `to` (`port`: the peer engine's
  // bootstrap port for a redirected remote Open, else 0).
  void open(ClientSession& c, const Operation& op, std::uint32_t to, std::uint16_t port, std::uint8_t redirects);
  // Send or Call on a forwarded endpoint (Sink): handed over, completed
  // when its Done comes back.
  Outcome offer(ClientSession& c, Endpoint& ep, const Operation& op, Attempt& at) override;
  // Close of a forwarded endpoint: handed over; the endpoint is gone here.
  void close(ClientSession& c, Endpoint& ep, const Operation& op);
  // The client detached: each engine with a shadow of it ends it.
  void client_gone(ClientSession& c);
  // A completion from `from` for our client.
  void on_done(std::uint32_t from, const CrossMsg& m);

  // ---- executor side ----
  void shadow_done(const ClientSession& shadow, const shm::CqEntry& entry) noexcept override;
  void shadow_freed(const ClientSession& shadow) noexcept override;
  // The peer redirected the Open `op` of `shadow`: its origin routes it again.
  void redirect(const ClientSession& shadow, const Operation& op, std::uint16_t port, std::uint32_t peer_engine,
                std::uint8_t redirects);

 private:
  void hand_over(ClientSession& c, std::uint32_t to, const Operation& op, std::uint16_t port, std::uint8_t redirects);

  Sessions& sessions_;
  Counters& counters_;
  CrossLink link_;
};

}  // namespace ferry::daemon
