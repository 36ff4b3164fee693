// Our clients' side of remote endpoints: Open("HOST:PORT/SERVICE") over a
// channel and the peer's OpenAck (remote_open.cpp), Send and Call on them
// (the Sink of remote endpoints, remote_sender.cpp), the peer's answers,
// Close, and what a detached client or a failed channel leaves
// (remote_sender_answers.cpp).
//
// Three shapes, chosen per op:
//   eager        header + payload in one message (tcp always; rdma up to the
//                eager threshold), the payload SGE straight from the
//                client's registered tx arena (a tracked WR: zero_copy.h);
//   + response   rdma Call whose response buffer is larger than
//     buffer     rdma-eager-response-bytes: a RemoteBuffer naming it rides
//                in front of the payload (SendWr prefix); the serving daemon
//                RDMA-WRITEs the reply into it with immediate, so the reply
//                lands without a copy here. A smaller one gets no key (no
//                window bind on the call's path): the reply comes back as a
//                message and is copied into it, like tcp;
//   rendezvous   rdma, over the eager threshold: a RendezvousReq carries the
//                source RemoteBuffer (and the response buffer) and the
//                serving daemon RDMA-READs the payload into its server's rx
//                arena (serve/rendezvous.h).
// A Send completes with the peer's zero-length Response (the delivery
// outcome), a Call with its Response or WriteDone.
//
// Back-pressure: ops wait on their endpoint (parking.h) for room in the send
// windows (send_windows.h) or their lane. A receiver that refuses an op Busy
// (its client's share of staging is full) refuses every later op of that
// endpoint until the refused one comes again (header seq); here the refused
// ops wait in their order and go again after a backoff (1..64 ms, doubling)
// once every op then in flight has been answered (those are refused too, and
// must go again before any later op), so order holds and a stopped consumer
// costs the shared lanes a few messages per backoff instead of a stream of
// retries. A refused op given up (its deadline) hands its number to the next
// op sent.
//
// The answer backstop: no answer to a Call by timeout + 2 x peer-timeout +
// 1 s means the peer lost it (lanes are reliable, so this is a fault, not a
// slow server). The channel is failed then: that is the one way to be sure
// the peer will not still READ or WRITE the client's buffers; the call
// completes Timeout, its neighbours PeerReset, and the client may re-open.
// Engine thread only.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/counters.h"
#include "daemon/engines/target.h"
#include "daemon/loop/deadlines.h"
#include "daemon/remote/peer_fwd.h"
#include "daemon/remote/rail_keys_sent.h"
#include "daemon/remote/remote_keys.h"
#include "daemon/remote/remote_ops.h"
#include "daemon/remote/send_windows.h"
#include "daemon/session/parking.h"
#include "daemon/session/sessions.h"
#include "daemon/session/sink.h"
#include "transport/wire/header.h"
#include "transport/wire/rail_keys.h"

namespace ferry::daemon {

// Who routes an Open again when the peer says another of its engines
// serves it (engines/open_router.h).
class OpenRedirects {
 public:
  virtual void redirected(ClientSession& c, const Operation& op, std::uint16_t port, std::uint32_t peer_engine,
                          std::uint8_t redirects) = 0;

 protected:
  ~OpenRedirects() = default;
};

class RemoteSender final : public Sink {
 public:
  // `remote_access`: the lanes can RDMA READ and WRITE with immediate
  // (response buffers and rendezvous); `lane_max_message`: the largest
  // payload of one lane message.
  RemoteSender(const Config& config, Sessions& sessions, peer::ChannelManager& peers, Parking& parking,
               Deadlines& deadlines, RemoteKeys& keys, Counters& counters, bool remote_access,
               std::uint32_t lane_max_message);

  // remote_open.cpp
  // `redirects`: how often a peer redirected this Open already.
  void open(ClientSession& c, const Operation& op, const Target& t, std::uint8_t redirects = 0);
  void set_redirects(OpenRedirects* r) noexcept { redirects_ = r; }
  void on_channel_up(peer::Channel& ch);
  // A peer connection slot freed after a dial found none: the Opens
  // waiting for one are dialled now.
  void slot_freed();
  void on_open_ack(peer::Channel& ch, const wire::Header& h);
  // Whether an op of ours (an Open included) is on channel `id`. Control rate.
  bool has_ops_on(std::uint32_t id);

  // remote_sender.cpp: a Send or Call on a remote endpoint (Sink).
  Outcome offer(ClientSession& c, Endpoint& ep, const Operation& op, Attempt& at) override;
  void given_up(Endpoint& ep, const Attempt& at) noexcept override;

  // remote_sender_answers.cpp
  void on_response(peer::Channel& ch, const wire::Header& h, const std::byte* payload);
  void on_write_done(peer::Channel& ch, const wire::Header& h);
  // A WR of ours (tag kind RemoteOp) finished: Ok is news only for none of
  // them (their peer's answer completes them); a failure fails the op.
  void on_send_done(std::uint64_t token, Status status);
  // The endpoint closes: its ops waiting for the peer complete Cancelled
  // (at once, or when the peer answers where it may still access the
  // client's memory), and the peer is told to drop its proxy.
  void close(ClientSession& c, Endpoint& ep);
  void client_gone(ClientSession& gone);
  void channel_down(peer::Channel& ch, Status why);
  // Backstops passed: their channels fail.
  [[nodiscard]] Sweep expire(std::uint64_t now_ns);
  // Keys opened or closed (remote_keys.h): requests that waited for their
  // keys go, ops that waited for theirs to close end. Returns the work done.
  std::size_t poll_keys();
  // Inline: asked every turn; without per-call keys nothing is ever pending.
  bool keys_pending() const noexcept { return !postable_.empty() || (keys_.per_call() && keys_.pending() != 0); }

  std::size_t inflight() const noexcept { return ops_.size(); }
  // Ops in flight that exposed a buffer (rendezvous source, response window).
  std::uint32_t exposed_inflight() const noexcept { return exposed_; }
  // Exposed ops started so far whose request or response is at least
  // engine-spin-bulk-bytes (spin_policy.h: Transfer::Large).
  std::uint64_t large_started() const noexcept { return large_started_; }
  void fill(peer::PeerInfo& p) const noexcept { windows_.fill(p); }

 private:
  struct Shape;
  Shape shape_of(const ClientSession& c, const Operation& op) const noexcept;
  Outcome admit(peer::Channel& ch, Endpoint& ep, std::uint32_t lane, const Operation& op, Attempt& at, bool zero_copy);
  [[nodiscard]] Status open_keys(ClientSession& c, const Operation& op, const Shape& s, std::uint64_t token,
                                 RemoteOp& rop);
  static std::uint64_t key_cookie(std::uint64_t token, std::uint64_t which) noexcept { return token << 1 | which; }
  // Which lane an endpoint's traffic takes (modulo the lanes): fixed for the
  // endpoint, so its messages stay in order. Endpoint ids count from 1 in
  // every client; adding the client's id spreads the first endpoints of
  // different clients over the lanes (and so over the rails).
  static std::uint32_t lane_key(const ClientSession& c, const Endpoint& ep) noexcept { return c.id() + ep.id; }
  transport::SendWr request_wr(ClientSession& c, const Endpoint& ep, const Shape& s, std::uint64_t token,
                               const RemoteOp& rop) const noexcept;
  Outcome post_request(ClientSession& c, const Endpoint& ep, peer::Channel& ch, std::uint64_t token, RemoteOp& rop);
  // Several rails: tells the peer the client's tx arena keys on every rail
  // (RailKeys) on the request's lane, once per (client, channel, lane),
  // before a request that exposes a buffer (rail_keys_sent.h). False: the
  // lane had no room (the request waits too).
  bool announce_keys(ClientSession& c, peer::Channel& ch, std::uint32_t lane);
  // Its keys are open: the request goes (or the op ends, if it cannot).
  void opened(std::uint64_t token, RemoteOp& op);
  void send_open(std::uint64_t token, RemoteOp& op, peer::Channel& ch);
  // Every path that ends a Send/Call goes through conclude(): it leaves the
  // send windows, closes its keys, and once they are closed the client
  // hears `outcome` (when `notify`) and the session's hold is released.
  // Returns true when the op has ended now (the caller erases it); false
  // while its keys close (poll_keys erases it then).
  bool conclude(std::uint64_t token, RemoteOp& op, Status outcome, std::uint32_t length, bool notify);
  void end(RemoteOp& op) noexcept;
  void unblock(const RemoteOp& op) noexcept;  // an op that waited for its keys no longer holds its endpoint back
  void refused(ClientSession& c, Endpoint& ep, const RemoteOp& op, std::uint64_t now_ns);
  void stall(std::uint32_t channel, Attempt& at) noexcept;
  void say_close(peer::Channel& ch, std::uint32_t lane, std::uint32_t from_ep, std::uint32_t to_ep);

  Sessions& sessions_;
  peer::ChannelManager& peers_;
  Parking& parking_;
  Deadlines& deadlines_;
  RemoteKeys& keys_;
  Counters& counters_;
  bool remote_access_;
  std::uint32_t lane_max_message_;
  std::uint32_t eager_response_max_;
  std::uint32_t exposed_ = 0;  // ops holding their session for an exposed buffer
  std::uint32_t large_bytes_;  // engine-spin-bulk-bytes (0: none counts)
  std::uint64_t large_started_ = 0;
  SendWindows windows_;
  RailKeysSent announced_;
  wire::RailKeys scratch_keys_{};
  RemoteOpTable ops_{1024};              // Open, Send, Call
  std::vector<std::uint64_t> postable_;  // keys open, the lane had no room: posted again each poll_keys
  std::vector<std::uint32_t> overdue_;   // scratch for expire
  // Opens (remote_open.cpp): how long failed set-ups are dialled again
  // (4 x connect-timeout-ms), and how soon after a failure.
  std::uint64_t open_retry_ns_;
  static constexpr std::uint64_t kOpenRedialNs = 100'000'000;
  std::vector<std::uint64_t> redialled_;  // scratch for retry_opens
  OpenRedirects* redirects_ = nullptr;    // null: a redirect fails the Open ServiceNotFound
  // Waits for the next dial of an Open whose set-up failed; false when its
  // budget is spent (the caller completes it with `why`).
  bool park_open(RemoteOp& op, std::uint64_t now_ns, bool for_slot) noexcept;
  void retry_opens(std::uint64_t now_ns, Sweep& out);
};

}  // namespace ferry::daemon
