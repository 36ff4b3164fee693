// Owns every channel to peer daemons and the transport they run on.
//
// Where the bootstrap runs: on the engine thread, through the Transport
// itself. The bootstrap connection is just another TcpTransport connection
// whose first message is Hello (token 0); data lanes are connections whose
// Hello carries token = lane + 1. That keeps one owner for every connection
// (no SPSC hand-over between an asio thread and the engine, no second
// socket layer), lets a peer death seen on either kind of connection fail
// the channel in the same turn, and gives the RDMA backend the same shape
// (its bootstrap can be one more RC connection or stay TCP beside it).
// Connects never block the engine: every connection is made with the
// transport's connect_async (channel_connect.cpp), which reports Connected
// or Closed (PeerUnreachable) from poll(); the transports' event fds wake a
// sleeping engine for it. A connect that fails, or a handshake unfinished
// at the channel's deadline, fails the channel with PeerUnreachable.
//
// Two transports: the bootstrap connection always runs on `t` (tcp); the
// data lanes run on `lanes` when given (rdma: RC QPs reached at the same
// HOST:PORT in the rdma_cm port space), else on `t` too. Connection ids of
// the two transports are told apart by ConnKey. Both sides must run their
// lanes on the same kind: the handshake carries kCapTcp or kCapRdma and a
// mismatch is refused with NotSupported (logged on both sides).
//
// Files: channel_manager.cpp (connect/accept/poll/send/snapshot),
// channel_handshake.cpp (Hello/HelloAck, duplicate resolution),
// channel_heartbeat.cpp (heartbeats, deadlines, failing a channel),
// channel_credits.cpp (receive credits on the data lanes),
// channel_auth.cpp (shared-secret challenge-response, wire/auth_proof.h).
//
// Receive credits (the first layer of flow control, docs/flow-control.md): a WR that uses a
// receive at the peer (Send, RdmaWriteImm) is posted only with a credit, so
// an RNR NAK cannot happen. A lane starts with the peer's handshake
// initial_credits (its transport's recv_depth) less the handshake message we
// sent on it. Every message we receive on a lane (WriteDone included) is a
// receive we owe back; it is granted only after the NEXT lanes poll (the
// transport reposts consumed receives at the start of poll()), piggybacked
// on the header `credit` of whatever we post on that lane next, or in an
// explicit Credit message when a quarter of our depth is owed or at tick()
// when anything a data message used is owed. One credit stays in reserve for
// Credit messages, so two sides out of credits can always unblock each
// other. A WR without a credit waits in the lane's FIFO backlog (fixed
// capacity; full -> Busy); later WRs of the lane queue behind it.
//
// Auth: with auth on, the acceptor joins no lane (so no data flows and no Open is
// served) until a lane Hello carries the initiator's valid proof.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/counters.h"
#include "daemon/peer/channel.h"
#include "ferry/result.h"
#include "transport/transport.h"

namespace ferry::daemon::peer {

struct ChannelConfig {
  std::uint64_t epoch = 1;  // this daemon's
  std::uint32_t heartbeat_ms = 500;
  std::uint32_t peer_timeout_ms = 3000;
  std::uint32_t connect_timeout_ms = 2000;
  std::uint32_t lanes = 1;
  std::uint32_t max_message_bytes = 1u << 20;
  std::uint16_t listen_port = 0;  // set by listen(); sent in the bootstrap Hello
  // Shared secret for peer authentication (channel_auth.cpp); empty: off.
  // Both daemons must agree: one with a secret refuses a peer without one
  // and vice versa (PermissionDenied), so a missing file fails loudly
  // instead of silently running unauthenticated.
  std::string auth_secret;
};

// What the engine hears from the channel layer. A virtual interface rather
// than std::function: one indirect call per event, no allocation.
class ChannelEvents {
 public:
  virtual ~ChannelEvents() = default;
  // Handshake done, every lane joined (and duplicates resolved: `ch` may
  // already be Draining in favour of ch.superseded_by).
  virtual void on_channel_up(Channel& ch) = 0;
  // Down or Failed; `why` is PeerReset (died), PeerUnreachable (never came
  // up), VersionMismatch/ProtocolError (refused), Ok (orderly). Called once.
  virtual void on_channel_down(Channel& ch, Status why) = 0;
  // A message on a lane of an Up/Draining channel. `payload` is valid until
  // the next ChannelManager::poll().
  virtual void on_message(Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload) = 0;
  // A signaled WR finished, or any WR failed.
  virtual void on_send_done(std::uint64_t user_data, Status status) = 0;
};

// One row of `ferryctl peers`, copied out for the control thread.
struct PeerInfo {
  std::uint32_t channel = 0;
  std::string address;
  std::uint64_t epoch = 0;
  ChannelState state = ChannelState::Connecting;
  std::uint32_t lane_count = 0;
  std::array<LaneStats, kMaxLanes> lanes{};
  std::array<transport::ConnId, kMaxLanes> lane_ids{};
  // Channel send window (engine) and RNR NAKs. rnr_naks is the daemon-wide
  // counter repeated per channel: the rdma transport does not count per QP.
  std::uint32_t window_ops = 0;
  std::uint64_t window_bytes = 0;
  std::uint64_t window_stalls = 0;
  std::uint32_t reads_inflight = 0;
  std::uint64_t rnr_naks = 0;
  std::uint32_t endpoints = 0;
  std::uint64_t rtt_us = 0;
  std::uint64_t since_s = 0;
  bool initiated = false;
  transport::TransportKind transport = transport::TransportKind::Tcp;  // what carries the data lanes
};

class ChannelManager {
 public:
  ChannelManager(transport::Transport& t, ChannelEvents& events, const ChannelConfig& cfg, Counters& counters,
                 transport::Transport* lanes = nullptr);
  ~ChannelManager();
  ChannelManager(const ChannelManager&) = delete;
  ChannelManager& operator=(const ChannelManager&) = delete;

  // Bootstrap listener (numeric host). Returns the bound port.
  // With separate lane transport, it listens on the same host and port.
  [[nodiscard]] Result<std::uint16_t> listen(std::string_view host, std::uint16_t port);

  // Get-or-create the channel to HOST:PORT (`address` is the key). A new one
  // starts its TCP connect without waiting for it: PeerUnreachable here only
  // when the connect fails at once (refused locally); a later failure or
  // connect_timeout_ms without an answer reports on_channel_down(channel,
  // PeerUnreachable). The channel may be Connecting or Handshaking on return.
  [[nodiscard]] Result<std::uint32_t> connect(const std::string& address, std::string_view host, std::uint16_t port,
                                              std::uint64_t now_ns);

  Channel* find(std::uint32_t id) noexcept;
  // The channel new work for `id` should use (a superseded duplicate forwards
  // to its winner); nullptr when none is usable.
  Channel* route(std::uint32_t id) noexcept;
  // Where the Opens of a channel going down should go instead: its winner if
  // it lost a duplicate race, else another live channel to the same peer
  // (same epoch or address; Up preferred, Handshaking accepted). nullptr
  // when the peer has no other channel.
  Channel* successor(const Channel& ch) noexcept;

  // Drains transport completions into events. Returns the work done.
  std::size_t poll(std::uint64_t now_ns) noexcept;
  // The engine is about to sleep: arms the transports' notifications. False
  // when it must poll once more first (Transport::prepare_to_sleep).
  bool prepare_to_sleep() noexcept;
  // The sleep ended. `transports`: by a transport's event or a timeout
  // (not only by a client's doorbell): the next poll() looks at the
  // bootstrap transport whatever the turn count.
  void woke(bool transports) noexcept { control_due_ = control_due_ || transports; }
  // Heartbeats, handshake deadlines, dead-peer timeouts. Cheap when idle.
  std::size_t tick(std::uint64_t now_ns);

  // Posts one message on a lane (lane % lane_count) of a usable channel.
  // `local`: the registration holding `payload` (rdma: the payload SGE is
  // then the caller's memory, no bounce copy); empty: the transport copies.
  [[nodiscard]] transport::PostResult send(Channel& ch, std::uint32_t lane, const wire::Header& h,
                                           const std::byte* payload, std::uint32_t len, std::uint64_t user_data,
                                           bool signaled, transport::MemoryHandle local = {}) noexcept;
  // Posts one WR of any op (rdma: RdmaWriteImm, RdmaRead) on a lane of a
  // usable channel; wr.conn is filled in here. send() is post() of a Send.
  // Accepted means it will go: a Send/RdmaWriteImm without a credit, any WR
  // behind a non-empty backlog, any WR of a lane being rebuilt and any WR
  // the transport refuses at once (send queue full, connection closing) is
  // queued, posted later, and kept after posting until the peer confirms it
  // (channel_lane_queue.cpp). Its completion (on_send_done) comes only then,
  // or with PeerReset when the channel ends: its payload must stay valid
  // until that. Busy only when the lane's ring is full; PeerReset when the
  // channel is not usable.
  [[nodiscard]] transport::PostResult post(Channel& ch, std::uint32_t lane, transport::SendWr wr) noexcept;
  // A header-only control message (an answer, OpenAck, Close) on a lane of
  // a usable channel: posted now, or held, in order, until the lane's ring
  // has room (counted in answer_stalls) and then posted by poll(). Dropped
  // when the channel ends first: the peer's side of it ends with the
  // channel too (its ops fail, its proxies go).
  void send_control(Channel& ch, std::uint32_t lane, const wire::Header& h) noexcept;
  // A zero-length Response to a peer's op (its endpoint `dst_ep`, its
  // `token`): a Send's outcome, a refusal, a call's timeout. Sent with
  // send_control; nothing when the channel is gone.
  void answer(std::uint32_t channel, std::uint32_t lane, std::uint32_t dst_ep, std::uint64_t token,
              Status status) noexcept;
  // Control messages held for room (the engine then polls instead of sleeping long).
  bool holding() const noexcept { return !held_.empty(); }

  // Whether post() on this lane would take one more WR now (not Busy).
  // Callers ask first when a refusal must not cost them work done before
  // the post (memory windows opened, a Reply's token used, an answer lost).
  bool has_room(const Channel& ch, std::uint32_t lane) const noexcept;

  // WRs a lane holds at most: posted and unconfirmed plus waiting.
  static constexpr std::uint32_t kBacklogCapacity = 1024;
  // Credits a data WR leaves unused: kept for an explicit Credit message.
  static constexpr std::uint32_t kCreditReserve = 1;
  static_assert((kBacklogCapacity & (kBacklogCapacity - 1)) == 0, "backlog index is masked");

  // Endpoint/proxy bookkeeping: a Draining duplicate closes when it has none.
  void bind_endpoint(Channel& ch) noexcept {
    ++ch.endpoints;
    ch.unused_since_ns = 0;
  }
  void unbind_endpoint(Channel& ch);

  // Orderly shutdown of every channel (Goodbye, close).
  void close_all();
  // Fails a channel the engine found broken (a peer that never answered).
  void fail_channel(Channel& ch, Status why, std::uint64_t now_ns) { fail(ch, why, now_ns); }

  std::size_t channel_count() const noexcept { return channels_.size(); }
  // A channel was made or changed state since the last call (the engine
  // then publishes a fresh snapshot).
  bool take_changed() noexcept { return std::exchange(changed_, false); }
  std::uint16_t listen_port() const noexcept { return cfg_.listen_port; }
  void snapshot(std::vector<PeerInfo>& out, std::uint64_t now_ns) const;
  int event_fd() const noexcept { return transport_.event_fd(); }
  // -1 when the lanes share the bootstrap transport.
  int lanes_event_fd() const noexcept { return split_ ? lanes_.event_fd() : -1; }
  transport::TransportKind lanes_kind() const noexcept { return lanes_.kind(); }
  const ChannelConfig& config() const noexcept { return cfg_; }

 private:
  // channel_manager.cpp
  struct ConnRef {
    std::uint32_t channel = 0;  // 0: accepted, no Hello yet
    std::int32_t lane = -1;     // -1: the bootstrap connection
  };
  // A connection of the bootstrap transport (on_lanes false) or of the lane
  // transport; one key space even when the two transports are separate.
  using ConnKey = std::uint64_t;
  ConnKey key(transport::ConnId c, bool on_lanes) const noexcept {
    return (split_ && on_lanes ? ConnKey{1} << 32 : 0) | c;
  }
  transport::Transport& via(bool on_lanes) noexcept { return on_lanes ? lanes_ : transport_; }
  std::size_t drain(bool on_lanes, std::uint64_t now_ns) noexcept;
  Channel& create(bool initiated, std::uint64_t now_ns);
  void on_recv(const transport::Completion& c, bool on_lanes, std::uint64_t now_ns);
  void on_send_done(const transport::Completion& c, bool on_lanes, std::uint64_t now_ns);
  // A data message on a lane of a usable channel: its ack, then its lane_seq
  // (in order: on to the engine; already seen: dropped; a gap: the lane breaks).
  void on_lane_message(Channel& ch, std::uint32_t lane, const transport::Completion& c, std::uint64_t now_ns);
  void on_closed(const transport::Completion& c, bool on_lanes);
  LaneStats* stats_of(Channel& ch, std::int32_t lane) noexcept;

  // channel_handshake.cpp
  wire::Handshake local_handshake() const noexcept;
  void send_hello(Channel& ch, transport::ConnId conn, std::uint64_t token, bool ack, Status status, bool on_lanes);
  void refuse(transport::ConnId conn, std::uint64_t token, Status status, bool on_lanes);
  bool same_data_path(const wire::Handshake& remote) const noexcept;
  void on_hello(transport::ConnId conn, const wire::Header& h, const std::byte* payload, bool on_lanes,
                std::uint64_t now_ns);
  void on_hello_ack(Channel& ch, std::int32_t lane, const wire::Header& h, const std::byte* payload,
                    std::uint64_t now_ns);
  void open_lanes(Channel& ch, std::uint64_t now_ns);
  void become_up(Channel& ch, std::uint64_t now_ns);
  void resolve_duplicate(Channel& ch);

  // channel_auth.cpp. Each returns false after refusing/failing (logged).
  bool auth_on() const noexcept { return !cfg_.auth_secret.empty(); }
  bool auth_start(Channel& ch, std::uint64_t now_ns);  // initiator: our nonce into the bootstrap Hello
  bool auth_check_hello(transport::ConnId conn, const wire::Handshake& remote, bool on_lanes);
  bool auth_accept(Channel& ch, const wire::Handshake& remote, std::uint64_t now_ns);  // acceptor: nonce + proof
  bool auth_check_ack(Channel& ch, const wire::Handshake& remote, std::uint64_t now_ns);
  bool auth_check_lane(Channel& ch, const wire::Handshake& remote) const noexcept;
  void auth_failed(Channel& ch, std::string_view why, std::uint64_t now_ns);
  void encode_channel_hello(Channel& ch, bool with_proof) noexcept;

  // channel_connect.cpp
  // Starts the bootstrap (lane -1) or a lane connect; false when the channel
  // failed (then already reported down).
  bool start_connect(Channel& ch, std::int32_t lane, std::uint64_t now_ns);
  void connected(Channel& ch, std::int32_t lane, transport::ConnId conn, std::uint64_t now_ns);
  // A lane's connect failed: a lane being rebuilt dials again after
  // kLaneRedialNs (rebuild_tick), one being set up fails the channel.
  bool lane_connect_failed(Channel& ch, std::uint32_t lane, std::uint64_t now_ns);
  // connect_async's Connected (rdma lanes).
  void on_connected(const transport::Completion& c, bool on_lanes, std::uint64_t now_ns);
  static constexpr std::uint64_t kLaneRedialNs = 200'000'000;

  // channel_heartbeat.cpp
  void set_state(Channel& ch, ChannelState to, std::uint64_t now_ns);
  void heartbeat(Channel& ch, std::uint64_t now_ns);
  void on_heartbeat(Channel& ch, const wire::Header& h, std::uint64_t now_ns);
  void fail(Channel& ch, Status why, std::uint64_t now_ns);
  void say_goodbye(Channel& ch, Status why) noexcept;  // on the bootstrap connection, before it closes
  void finish(Channel& ch, Status why, bool orderly, std::uint64_t now_ns);
  // A losing duplicate's initiator closes it once no endpoint uses it and
  // its lanes hold nothing unconfirmed (or peer-timeout after that).
  void close_if_unused(Channel& ch, std::uint64_t now_ns);
  void reap();

  // channel_credits.cpp
  static bool uses_receive(transport::WrOp op) noexcept {
    return op == transport::WrOp::Send || op == transport::WrOp::RdmaWriteImm;
  }
  // Control path: the lane rings of an Up channel; dropped in finish().
  void start_credits(Channel& ch);
  // A lane's handshake told the peer's initial credits. Acceptor: from its
  // Hello (which used one of our receives). Initiator: from its HelloAck.
  void lane_credits_from(Channel& ch, std::uint32_t lane, std::uint32_t peer_initial, bool hello_received);
  void lane_credits_from_ack(Channel& ch, std::int32_t lane, const wire::Header& h, const std::byte* payload);
  // Every message received on a lane: owes a receive, takes its grant.
  // false: the grant was too large and the channel failed.
  bool credits_in(Channel& ch, std::uint32_t lane, const wire::Header& h, std::uint64_t now_ns) noexcept;
  // After a lanes poll: receives used before it are reposted, so grantable.
  void credits_reposted() noexcept;
  bool send_credit(Channel& ch, std::uint32_t lane) noexcept;
  void credit_tick(Channel& ch) noexcept;

  // channel_lane_queue.cpp: every WR a lane carries, in one ring per lane:
  // [unconfirmed: posted, kept until the peer's ack covers it][backlog:
  // waiting for credits or for a rebuilt connection]. Both together hold at
  // most kBacklogCapacity WRs. A kept WR's completion reaches the engine
  // only once the peer confirmed it (and the transport finished it), so its
  // payload (client memory) stays valid for a replay.
  struct Slot {
    transport::SendWr wr;
    std::uint64_t posted_ns = 0;
    std::uint32_t seq = 0;  // lane_seq it went with; 0: unnumbered (RDMA READ)
    bool done = false;      // the transport completed it Ok
  };
  struct LaneRing {
    std::unique_ptr<Slot[]> slots;  // kBacklogCapacity, allocated when the channel comes up
    std::uint32_t head = 0;
  };
  using ChannelRings = std::array<LaneRing, kMaxLanes>;
  LaneRing* ring_of(std::uint32_t channel, std::uint32_t lane) noexcept;
  // Posts up to n backlog WRs from the front of the backlog (they become
  // unconfirmed); numbers them, piggybacks ack and owed credits.
  [[nodiscard]] transport::PostResult post_backlog(Channel& ch, std::uint32_t lane, std::uint32_t n) noexcept;
  void flush_backlog(Channel& ch, std::uint32_t lane) noexcept;
  // A pure Credit (or other unkept message) straight to the transport.
  [[nodiscard]] transport::PostResult post_unkept(Lane& l, transport::SendWr& wr) noexcept;
  // The peer's cumulative ack on any lane message; false: it acks what we
  // never sent (the channel failed).
  bool take_ack(Channel& ch, std::uint32_t lane, std::uint32_t ack, std::uint64_t now_ns) noexcept;
  // SendDone of a WR on a live lane connection.
  void lane_send_done(Channel& ch, std::uint32_t lane, const transport::Completion& c, std::uint64_t now_ns) noexcept;
  // Hands confirmed WRs at the front of the ring to the engine.
  void report_confirmed(Channel& ch, std::uint32_t lane) noexcept;
  // A new connection joined a broken lane and the peer got up to peer_rx:
  // what it confirmed completes, the rest goes again, in order, first.
  void replay(Channel& ch, std::uint32_t lane, std::uint32_t peer_rx, std::uint64_t now_ns);
  // Completes every kept and queued WR with PeerReset, once; frees the rings.
  void fail_backlog(Channel& ch) noexcept;

  // channel_rebuild.cpp
  // Whether a lane of `ch` may be rebuilt rather than failing the channel.
  bool rebuildable(Channel& ch, std::uint64_t now_ns) noexcept;
  // The lane's connection is gone or untrustworthy: drop it, keep its WRs;
  // the initiator dials a new one. Fails the channel when it cannot.
  void break_lane(Channel& ch, std::uint32_t lane, std::string_view why, std::uint64_t now_ns);
  // Acceptor: a rejoin Hello for lane `lane` of `ch` on `conn`.
  void rejoin_accept(Channel& ch, std::uint32_t lane, transport::ConnId conn, const wire::Header& h,
                     const wire::Handshake& remote, bool on_lanes, std::uint64_t now_ns);
  // Initiator: the rejoin HelloAck.
  void rejoin_ack(Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload,
                  std::uint64_t now_ns);
  // Rebuild deadlines and the retransmission timeout (unacked too long).
  void rebuild_tick(Channel& ch, std::uint64_t now_ns);

  transport::Transport& transport_;  // bootstrap connections
  transport::Transport& lanes_;      // data lanes (== transport_ unless split_)
  bool split_ = false;
  // With rdma lanes the bootstrap transport carries only handshakes,
  // heartbeats and goodbyes, and with no channel only accepts: poll() then
  // looks at it every kControlPollEvery-th call, after a sleep and, once
  // closing, always; each look is a syscall.
  static constexpr std::uint32_t kControlPollEvery = 16;
  std::uint32_t polls_ = 0;
  bool control_due_ = true;
  bool closing_ = false;
  ChannelEvents& events_;
  ChannelConfig cfg_;
  Counters& counters_;
  std::uint32_t next_id_ = 1;
  std::unordered_map<std::uint32_t, std::unique_ptr<Channel>> channels_;
  std::unordered_map<std::string, std::uint32_t> by_address_;
  // Redial rate limit per address (connect()): after a channel we dialled
  // fails, the next dial waits delay_ns; it doubles (100 ms .. 2 s) while
  // dials keep failing before Up and is forgotten once a channel comes Up.
  // Opens in the wait fail PeerUnreachable at once, so a dead or flapping
  // peer costs one connect per interval, not one per Open.
  struct Redial {
    std::uint64_t not_before_ns = 0;
    std::uint64_t delay_ns = 0;
  };
  std::unordered_map<std::string, Redial> redial_;
  void defer_redial(const Channel& ch, std::uint64_t now_ns);
  std::unordered_map<ConnKey, ConnRef> conns_;
  std::vector<std::uint32_t> finished_;  // channels to erase at the end of a turn
  std::array<transport::Completion, transport::kPollBatch> batch_{};
  // Our Hello/HelloAck payload, encoded once: WR payloads must outlive the post.
  std::array<std::byte, wire::kHandshakeMaxBytes> hello_{};
  std::uint32_t hello_len_ = 0;
  std::uint64_t last_now_ns_ = 0;
  // Credits and lane rings (channel_credits.cpp, channel_lane_queue.cpp).
  std::unordered_map<std::uint32_t, std::unique_ptr<ChannelRings>> rings_;
  std::uint32_t recv_depth_ = 2;       // receives our lane transport posts per connection
  std::uint32_t grant_threshold_ = 1;  // owed at which an explicit Credit goes out
  bool reposts_due_ = false;           // some lane used receives since the last lanes poll
  // send_control's messages waiting for room, in order.
  struct HeldControl {
    std::uint32_t channel = 0;
    std::uint32_t lane = 0;
    wire::Header header;
  };
  std::deque<HeldControl> held_;
  std::vector<std::uint64_t> held_blocked_;  // scratch for flush_held: lanes whose first held message waits
  std::size_t flush_held() noexcept;
  bool changed_ = false;
};

}  // namespace ferry::daemon::peer
