// Deliveries to this daemon's services: the service registry (Serve,
// Unserve), endpoints opened to a local service (their Sink), and the
// delivery itself, shared by local senders and by peers' traffic
// (serve/proxy_server.h): the payload is copied once, from the sender's
// tx arena or the transport's receive buffer, into a block of the server's
// rx arena, and a Message or Request names it; a payload of at most
// shm::kInlineMaxBytes goes inline in the server's CQ instead while its
// window allows (Sessions::take_inline). No room at the server (rx arena
// or CQ full): Blocked, and the op waits (parking.h, staging).
// Engine thread only.
#pragma once

#include <cstdint>
#include <string_view>

#include "daemon/counters.h"
#include "daemon/serve/call_table.h"
#include "daemon/serve/calls.h"
#include "daemon/serve/services.h"
#include "daemon/session/sessions.h"
#include "daemon/session/sink.h"

namespace ferry::daemon {

class ServiceDirectory;

// `source` of a delivery that came from a peer: this bit | the proxy id
// (ProxyServer sets it; post_delivery reads it for caller_flags).
inline constexpr std::uint32_t kRemoteSourceBit = 1u << 31;

class LocalDelivery final : public Sink {
 public:
  // `directory`: the host's service names (engines/service_directory.h);
  // `engine`: ours, under which our services are listed there.
  LocalDelivery(Sessions& sessions, Calls& calls, Counters& counters, ServiceDirectory& directory,
                std::uint32_t engine);

  // The services this engine serves.
  const ServiceRegistry& services() const noexcept { return services_; }
  void serve(ClientSession& c, const Operation& op);
  void unserve(ClientSession& c, const Operation& op);
  // A client detached: its services go (deliveries still waiting for them
  // fail ServiceGone on their next try).
  void client_gone(ClientSession& gone);

  // Open of service `id` of this engine (the directory named it): an
  // endpoint bound here.
  void open(ClientSession& c, const Operation& op, std::uint32_t service_id);
  // A Send or Call of `c` on a local endpoint (Sink).
  Outcome offer(ClientSession& c, Endpoint& ep, const Operation& op, Attempt& at) override;

  // Copies `length` bytes of `payload` into the rx arena (or inline into
  // the CQ) of service `s`'s owner and posts a Message, or (is_call) a
  // Request for `call`.
  // `from`: the sender's session when the caller has it (else looked up by `source`).
  Outcome deliver(const Service& s, bool is_call, const std::byte* payload, std::uint32_t length, std::uint32_t source,
                  const PendingCall& call, const ClientSession* from = nullptr);
  // The two halves of deliver(), apart for rendezvous (the block is filled
  // by an RDMA READ in between): an rx block at the service's owner...
  struct Reservation {
    Outcome outcome;
    ClientSession* server = nullptr;
    shm::Block block{};
  };
  [[nodiscard]] Reservation reserve(const Service& s, std::uint32_t length);
  // ... then the Message/Request naming it.
  void publish(ClientSession& server, const Service& s, bool is_call, shm::Block block, std::uint32_t length,
               std::uint32_t source, const PendingCall& call);

 private:
  // deliver() to a known owner (an endpoint's cached one, or looked up):
  // a Message, or a Request for `call` when it is not null.
  Outcome deliver_to(const Service& s, ClientSession* owner, const PendingCall* call, const std::byte* payload,
                     std::uint32_t length, std::uint32_t source, const ClientSession* from);
  // Bumped whenever a service or a client goes: endpoints' cached lookups
  // (Endpoint::cached_service) are stale then.
  void forget_lookups() noexcept { ++gen_; }
  void post_delivery(ClientSession& server, const Service& s, shm::CqKind kind, shm::Block block, std::uint32_t length,
                     std::uint32_t source, std::uint64_t token, const ClientSession* from = nullptr);
  // A Message/Request for `s` with no payload place yet (offset, capacity
  // 0); `from`: the sender's session, or nullptr to look it up by `source`;
  // `flags`: shm::kCqFlagInline or 0.
  shm::CqEntry delivery_entry(const Service& s, shm::CqKind kind, std::uint32_t length, std::uint32_t source,
                              std::uint64_t token, const ClientSession* from, std::uint8_t flags) noexcept;
  // Opens `call` at `server` for service `s`; returns its reply token.
  std::uint64_t open_call(ClientSession& server, const Service& s, const PendingCall& call);

  Sessions& sessions_;
  Calls& calls_;
  Counters& counters_;
  ServiceDirectory& directory_;
  std::uint32_t engine_;
  ServiceRegistry services_;
  std::uint64_t gen_ = 1;
};

}  // namespace ferry::daemon
