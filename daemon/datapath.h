// One engine's datapath: its components, assembled, and how the channel
// layer's events and the other engines' messages reach them. The Engine
// (engine.h) runs the loop around it; tests build one on recording
// transports and drive the components directly (tests/unit/daemon/
// components_*). Engine thread only.
//
// Who owns what (docs/daemon.md): sessions (clients, CQs, segments kept for
// WRs in flight), local delivery (services, deliveries), calls (calls being
// served and their replies), remote sender (our remote ops and send
// windows), proxy server (peers' endpoints here, staging, rendezvous),
// channel manager (channels, lanes), forwarder and open router (what runs
// on another engine, and where an Open runs).
#pragma once

#include <cstdint>
#include <memory>

#include "daemon/config/config.h"
#include "daemon/counters.h"
#include "daemon/engines/engine_group.h"
#include "daemon/engines/forwarder.h"
#include "daemon/engines/open_router.h"
#include "daemon/loop/deadlines.h"
#include "daemon/peer/channel_manager.h"
#include "daemon/peer/transport_choice.h"
#include "daemon/remote/remote_sender.h"
#include "daemon/serve/calls.h"
#include "daemon/serve/local_delivery.h"
#include "daemon/serve/proxy_server.h"
#include "daemon/session/dispatch.h"
#include "daemon/session/parking.h"
#include "daemon/session/sessions.h"

namespace ferry::daemon {

class Datapath final : private peer::ChannelEvents {
 public:
  // Engine `index` of `group`; `epoch` names this engine to peers; the
  // channels run on `transports`, which outlive this. Throws at start-up
  // when the configuration cannot be had (auth secret, service owners).
  Datapath(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch, EngineGroup& group,
           std::uint32_t index, Transports& transports);
  Datapath(const Datapath&) = delete;
  Datapath& operator=(const Datapath&) = delete;

  // Every client's new submissions (a bounded batch each).
  std::size_t poll_submissions();
  // Calls past their timeout, remote calls past their backstop.
  std::size_t expire();
  // The client (or, from its origin, a shadow) `id` is gone: everything of
  // it ends, each op exactly once. False when it was not here.
  bool detach(std::uint32_t id);
  // What another engine handed this one (engines/cross_msg.h).
  void on_cross(std::uint32_t from, const CrossMsg& m);

  // The components, in the order they are made.
  Deadlines deadlines;
  Sessions sessions;
  std::unique_ptr<peer::ChannelManager> peers;
  Parking parking;
  RemoteSender remote;
  Calls calls;
  LocalDelivery local;
  ProxyServer proxy;
  Forwarder forwarder;
  OpenRouter router;
  Dispatcher dispatcher;

 private:
  // The channel layer's events, routed to the components they concern.
  void on_channel_up(peer::Channel& ch) override;
  void on_channel_down(peer::Channel& ch, Status why) override;
  bool channel_idle(const peer::Channel& ch) override;
  void on_slot_freed() override;
  void on_message(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload) override;
  void on_send_done(std::uint64_t user_data, Status status) override;
  // datapath_cross.cpp
  void make_shadow(std::uint32_t from, const CrossMsg& m);
  void run_forwarded(std::uint32_t from, const CrossMsg& m);

  std::uint32_t index_;
  Transports& transports_;
};

}  // namespace ferry::daemon
