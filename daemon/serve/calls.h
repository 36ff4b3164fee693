// Calls delivered to this daemon's servers and not yet replied to, wherever
// the caller is (a local client, or a peer daemon's client behind a proxy
// endpoint): their Replies, their timeouts, and what happens to them when a
// caller, a server, a proxy or a channel goes away. Engine thread only.
//
// A call's timeout: how long it may wait at the server's daemon, from its
// arrival there to the server's reply (the Call's own timeout_ms, else
// call-timeout-ms; 0 = none). Time spent waiting for room at the server
// (parked, staged) or being READ counts: a call still waiting then fails
// Timeout there (parking.h, serve/proxy_server.h). This daemon enforces it,
// because only it knows when the server got the request and only it can
// stop the reply: past the deadline a local caller's Call completes
// Timeout, a peer caller gets a Response with status Timeout (on the call's
// lane, after any WRITE already posted into its response buffer), and the
// server's late Reply gets CallerGone. (The calling daemon of a remote call
// keeps only a backstop: remote/remote_sender.h.)
#pragma once

#include <cstdint>

#include "daemon/counters.h"
#include "daemon/loop/deadlines.h"
#include "daemon/serve/call_table.h"
#include "daemon/serve/remote_reply.h"
#include "daemon/session/operation.h"
#include "daemon/session/sessions.h"

namespace ferry::daemon {

namespace peer {
class ChannelManager;
}

class Calls {
 public:
  // `lane_max_message`: the largest Response a lane carries (remote_reply.h).
  Calls(Sessions& sessions, peer::ChannelManager& peers, Deadlines& deadlines, Counters& counters,
        std::uint64_t token_key, std::uint32_t lane_max_message);

  // A Request is being delivered: the call is open; its token for the server.
  [[nodiscard]] std::uint64_t open(PendingCall call);
  // The server's Reply (op Reply, token op.token).
  void reply(ClientSession& server, const Operation& op);

  // The caller closed `endpoint`: its calls complete Cancelled now, their
  // late replies CallerGone.
  void caller_closed(ClientSession& caller, std::uint32_t endpoint);
  // A client detached: calls it serves fail (callers hear ServiceGone),
  // calls it made wait for a reply that then gets CallerGone.
  void client_gone(ClientSession& gone);
  // A peer closed proxy endpoint `proxy` of `channel`: its calls still
  // being served get CallerGone replies, and the peer hears Cancelled now
  // (it waits for that before it hands an exposed response buffer back).
  void proxy_closed(std::uint32_t channel, std::uint32_t proxy);
  // The channel died: its callers are gone.
  void channel_down(std::uint32_t channel);

  // Calls whose timeout passed complete Timeout.
  [[nodiscard]] Sweep expire(std::uint64_t now_ns);
  std::size_t size() const noexcept { return table_.size(); }
  // Replies to peers' calls, in flight until their SendDone.
  RemoteReplier& replier() noexcept { return replier_; }
  const RemoteReplier& replier() const noexcept { return replier_; }

 private:
  void reply_local(ClientSession& server, const Operation& op, const PendingCall& call);

  Sessions& sessions_;
  peer::ChannelManager& peers_;
  RemoteReplier replier_;
  Deadlines& deadlines_;
  Counters& counters_;
  CallTable table_;
};

}  // namespace ferry::daemon
