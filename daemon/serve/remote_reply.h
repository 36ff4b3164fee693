// Replies to calls that came from a peer daemon: the server's answer goes
// back on the call's lane, from the server's tx arena without a copy (the
// Reply completes on the transport's SendDone, when that buffer is free
// again): an RDMA WRITE with immediate straight into the caller's response
// buffer where it gave one (rdma), else a Response message. Engine thread.
#pragma once

#include <cstdint>

#include "daemon/counters.h"
#include "daemon/remote/remote_ops.h"
#include "daemon/serve/call_table.h"
#include "daemon/session/operation.h"
#include "daemon/session/sessions.h"

namespace ferry::daemon {

namespace peer {
class ChannelManager;
}

class RemoteReplier {
 public:
  RemoteReplier(Sessions& sessions, peer::ChannelManager& peers, Counters& counters, std::uint32_t lane_max_message);

  // Posts `server`'s Reply to `call`. Busy: no room toward the caller (its
  // lane's ring full, or every zero-copy tracking slot busy); the Reply has
  // completed Busy and the call must stay open for another Reply (or its
  // timeout). Anything else: the call's token is used up (the Reply has
  // completed, or completes on its SendDone).
  [[nodiscard]] Status reply(ClientSession& server, const Operation& op, const PendingCall& call);
  // The SendDone of a Reply's WR (tag kind Reply).
  void on_send_done(std::uint64_t token, Status status);
  // A channel ended: its Replies not yet done fail PeerReset.
  void channel_down(std::uint32_t channel);
  // A server detached: nobody to complete its Replies to.
  void client_gone(std::uint32_t client);
  std::size_t size() const noexcept { return ops_.size(); }

 private:
  Sessions& sessions_;
  peer::ChannelManager& peers_;
  Counters& counters_;
  std::uint32_t lane_max_message_;
  RemoteOpTable ops_{1024};  // kind Reply only
};

}  // namespace ferry::daemon
