// Where an Open runs. An endpoint lives on the engine that owns what it
// reaches, so its Sends and Calls never wait on another engine's state:
//
//   "SERVICE" (this daemon)    the engine that serves SERVICE (the service
//                              directory says which);
//   "HOST:PORT/SERVICE"        the engine that owns the channels to the
//                              peer engine serving it: peer engine k is
//                              reached from our engine k mod N. A first
//                              Open goes to the peer engine listening on
//                              PORT (reached from engine 0); when another
//                              of its engines serves SERVICE the peer
//                              redirects the Open there (OpenAck with
//                              kFlagRedirect: that engine's index and port).
//
// On another engine the Open runs on the client's shadow (forwarder.h).
// A peer may redirect an Open at most kMaxRedirects times; past that it
// fails ServiceNotFound. Engine thread only.
#pragma once

#include <cstdint>
#include <optional>

#include "daemon/counters.h"
#include "daemon/engines/engine_group.h"
#include "daemon/engines/forwarder.h"
#include "daemon/engines/target.h"
#include "daemon/remote/remote_sender.h"
#include "daemon/serve/local_delivery.h"
#include "daemon/session/sessions.h"

namespace ferry::daemon {

inline constexpr std::uint8_t kMaxRedirects = 2;

class OpenRouter final : public OpenRedirects {
 public:
  OpenRouter(const Config& config, EngineGroup& group, std::uint32_t self, Sessions& sessions, LocalDelivery& local,
             RemoteSender& remote, Forwarder& forwarder, Counters& counters);

  // Open `op` of `c` (its target text in c's tx arena). `port`: the peer
  // engine's bootstrap port when the peer redirected it (then
  // `redirects` > 0), else 0.
  void open(ClientSession& c, const Operation& op, std::uint16_t port = 0, std::uint8_t redirects = 0);
  // The peer serves the Open elsewhere (RemoteSender, or a shadow's origin).
  void redirected(ClientSession& c, const Operation& op, std::uint16_t port, std::uint32_t peer_engine,
                  std::uint8_t redirects) override;

 private:
  void complete(ClientSession& c, const Operation& op, Status s);

  EngineGroup& group_;
  std::uint32_t self_;
  Sessions& sessions_;
  LocalDelivery& local_;
  RemoteSender& remote_;
  Forwarder& forwarder_;
  Counters& counters_;
  std::optional<HostPort> own_listen_;  // a target naming it (or another engine's port) is local
};

}  // namespace ferry::daemon
