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
// Who owns what: a Channel (channel.h) owns everything of one peer channel,
// its lanes included; a Lane (lane.h) owns its credits, sequence numbers,
// acks and WR ring, and is the only one to touch them. The ChannelTable
// (channel_table.h) holds the channels by id, their life in the table, and
// the two lookups completions and Opens need (connection -> channel,
// address -> channel and redial wait). LaneFlow (lane_flow.h) moves the
// lanes of a usable channel: credits and acks in, lane_seq order, backlog
// flushes, breaking a lane and replaying it once rebuilt, and each tick's
// rebuild deadlines, retransmission timeout and idle grants. ChannelCredits
// (channel_credits.h) owns the receive pool and what the handshake offers.
//
// The handshake (channel_handshake.h: our Hello, what each Hello,
// HelloAck and Challenge does, duplicates, auth's call sites) is a piece of
// its own, which asks the manager, as its HandshakeHost, to make, change,
// fail, dial and bring up channels.
//
// Files: channel_manager.cpp (accept, the completion pump, posting,
// snapshot), channel_connect.cpp (connects, dialling lanes, a channel going
// Up), channel_lifecycle.cpp (heartbeats, deadlines, failing and ending
// channels, channels on demand). Beside it: ChannelAuth (channel_auth.cpp,
// the shared-secret steps), heartbeat.h (the bootstrap connection's small
// messages), HeldControls (held_controls.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/counters.h"
#include "daemon/peer/channel.h"
#include "daemon/peer/channel_auth.h"
#include "daemon/peer/channel_config.h"
#include "daemon/peer/channel_credits.h"
#include "daemon/peer/channel_handshake.h"
#include "daemon/peer/channel_table.h"
#include "daemon/peer/held_controls.h"
#include "daemon/peer/lane_flow.h"
#include "daemon/peer/peer_index.h"
#include "daemon/peer/peer_keys.h"
#include "daemon/peer/receive_pool.h"
#include "ferry/result.h"
#include "transport/log_limiter.h"
#include "transport/transport.h"

namespace ferry::daemon::rails {
class RailSet;
}

namespace ferry::daemon::peer {

// What the engine hears from the channel layer. A virtual interface rather
// than std::function: one indirect call per event, no allocation. Its
// on_send_done (LaneCompletions) hears every WR a lane retires.
class ChannelEvents : public LaneCompletions {
 public:
  // Handshake done, every lane joined (and duplicates resolved: `ch` may
  // already be Draining in favour of ch.superseded_by).
  virtual void on_channel_up(Channel& ch) = 0;
  // Down or Failed; `why` is PeerReset (died), PeerUnreachable (never came
  // up), VersionMismatch/ProtocolError (refused), Ok (orderly). Called once.
  virtual void on_channel_down(Channel& ch, Status why) = 0;
  // A message on a lane of an Up/Draining channel. `payload` is valid until
  // the next ChannelManager::poll().
  virtual void on_message(Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload) = 0;
  // Whether nothing of the engine's waits on `ch` (no remote op on it): it
  // may then be evicted. Asked at tick rate, for channels with no endpoint.
  virtual bool channel_idle(const Channel& ch) = 0;
  // A connection closed here after a dial had found no free slot
  // (peer-max-connections): Opens waiting for one may dial now.
  virtual void on_slot_freed() {}
};

// One row of `ferryctl peers`, copied out for the control thread.
struct PeerInfo {
  std::uint32_t channel = 0;
  std::uint32_t engine = 0;  // the engine that owns the channel (set by the daemon's EngineSet)
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

class ChannelManager : private LaneFlowHost, private HandshakeHost {
 public:
  ChannelManager(transport::Transport& t, ChannelEvents& events, const ChannelConfig& cfg, Counters& counters,
                 transport::Transport* lanes = nullptr);
  ~ChannelManager();
  const ReceivePool& receive_pool() const noexcept { return credits_.pool(); }
  ChannelManager(const ChannelManager&) = delete;
  ChannelManager& operator=(const ChannelManager&) = delete;

  // Several rails (before listen(), start-up only): lanes dial from the
  // rail set's rails and the handshake tells peers their addresses.
  void set_rails(rails::RailSet* rails);
  // The rail lane `lane` of channel `channel` is on now (0: one rail, or
  // the lane has no connection).
  std::uint32_t rail_of_lane(std::uint32_t channel, std::uint32_t lane) noexcept;
  // Rails this daemon tells its peers about (0: one rail, no rails block).
  std::uint32_t rail_count() const noexcept { return handshake_.rail_count(); }
  // The peers' arena keys per rail (peer_keys.h), learned from their
  // RailKeys messages (on_rail_keys); a channel's entries go with it.
  PeerKeyTable& peer_keys() noexcept { return peer_keys_; }
  // A RailKeys message on a lane: its entry goes into the channel's table;
  // a bad payload is logged, counted (rail_keys_refused) and dropped.
  void on_rail_keys(Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload);

  // Bootstrap listener (numeric host). Returns the bound port.
  // With separate lane transport, it listens on the same host and port.
  [[nodiscard]] Result<std::uint16_t> listen(std::string_view host, std::uint16_t port);

  // Get-or-create the channel to HOST:PORT (`address` is the key). A new one
  // starts its TCP connect without waiting for it: PeerUnreachable here only
  // when the connect fails at once (refused locally), Busy when no peer
  // connection slot is free here (peer-max-connections); a later failure or
  // connect_timeout_ms without an answer reports on_channel_down(channel,
  // PeerUnreachable). The channel may be Connecting or Handshaking on return.
  [[nodiscard]] Result<std::uint32_t> connect(const std::string& address, std::string_view host, std::uint16_t port,
                                              std::uint64_t now_ns);

  // The channel table's lookups (channel_table.h).
  Channel* find(std::uint32_t id) noexcept { return table_.find(id); }
  Channel* route(std::uint32_t id) noexcept { return table_.route(id); }
  Channel* successor(const Channel& ch) noexcept { return table_.successor(ch); }

  // Drains transport completions into events. Returns the work done.
  std::size_t poll(std::uint64_t now_ns) noexcept;
  // Whether poll() would do nothing this turn: no channel, no connection
  // event due and not the turn that looks at the listener. Inline, so an
  // engine without peers pays a few loads per turn, not a call; a turn it
  // says true for counts as polled.
  bool quiet_turn(std::uint64_t now_ns) noexcept {
    if (split_ || control_due_ || closing_ || !table_.empty() || !held_.empty() || table_.has_retired()) return false;
    if ((polls_ + 1) % kControlPollEvery == 0) return false;  // poll() looks at the listener this turn
    ++polls_;
    last_now_ns_ = now_ns;
    return true;
  }
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
  // (lane.h). Its completion (on_send_done) comes only then,
  // or with PeerReset when the channel ends: its payload must stay valid
  // until that. Busy only when the lane's ring is full; PeerReset when the
  // channel is not usable.
  [[nodiscard]] transport::PostResult post(Channel& ch, std::uint32_t lane, transport::SendWr wr) noexcept;
  // A header-only control message (an answer, OpenAck, Close) on a lane of
  // a usable channel: posted now, or held, in order, until the lane's ring
  // has room (counted in answer_stalls) and then posted by poll(). Dropped
  // when the channel ends first: the peer's side of it ends with the
  // channel too (its ops fail, its proxies go).
  void send_control(Channel& ch, std::uint32_t lane, const wire::Header& h) noexcept { held_.send(*this, ch, lane, h); }
  // A zero-length Response to a peer's op (its endpoint `dst_ep`, its
  // `token`): a Send's outcome, a refusal, a call's timeout. Sent with
  // send_control; nothing when the channel is gone.
  void answer(std::uint32_t channel, std::uint32_t lane, std::uint32_t dst_ep, std::uint64_t token,
              Status status) noexcept;
  // Control messages held for room (the engine then polls instead of sleeping long).
  bool holding() const noexcept { return !held_.empty(); }
  void count_answer_stall() noexcept { bump(counters_.answer_stalls); }

  // Whether post() on this lane would take one more WR now (not Busy).
  // Callers ask first when a refusal must not cost them work done before
  // the post (memory windows opened, a Reply's token used, an answer lost).
  bool has_room(const Channel& ch, std::uint32_t lane) const noexcept;

  // WRs a lane holds at most: posted and unconfirmed plus waiting.
  static constexpr std::uint32_t kBacklogCapacity = Lane::kCapacity;
  // Goodbye token of the idle-close exchange (channels on demand).
  static constexpr std::uint64_t kIdleClose = 1;

  // Endpoint/proxy bookkeeping: a Draining duplicate closes when it has none.
  void bind_endpoint(Channel& ch) noexcept {
    ++ch.endpoints;
    ch.unused_since_ns = 0;
  }
  void unbind_endpoint(Channel& ch);

  // Orderly shutdown of every channel (Goodbye, close).
  void close_all();
  // Fails a channel the engine found broken (a peer that never answered);
  // the lane flow's LaneFlowHost::fail_channel too.
  void fail_channel(Channel& ch, Status why, std::uint64_t now_ns) override { fail(ch, why, now_ns); }

  std::size_t channel_count() const noexcept { return table_.size(); }
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
  transport::Transport& via(bool on_lanes) noexcept { return on_lanes ? lanes_ : transport_; }
  std::size_t drain(bool on_lanes, std::uint64_t now_ns) noexcept;
  Channel& create(bool initiated, std::uint64_t now_ns);
  Channel& create_channel(bool initiated, std::uint64_t now_ns) override { return create(initiated, now_ns); }
  void on_recv(const transport::Completion& c, bool on_lanes, std::uint64_t now_ns);
  void on_send_done(const transport::Completion& c, bool on_lanes, std::uint64_t now_ns);
  // A data message on a lane of a usable channel: on to the engine when
  // LaneFlow admits it (in lane_seq order).
  void on_lane_message(Channel& ch, std::uint32_t lane, const transport::Completion& c, std::uint64_t now_ns);
  void on_closed(const transport::Completion& c, bool on_lanes);
  // Goodbye(Busy) before a connection of ours was admitted, or a dial that
  // closed Busy: the peer's listener had no free slot for it (its tcp
  // transport answers so and closes; its rdma transport rejects with that
  // reason). A lane being rebuilt dials again later; a channel being set
  // up fails Busy, its Opens waiting for room. False: neither case.
  bool turned_away(Channel& ch, std::int32_t lane, transport::ConnId conn, std::uint64_t now_ns);
  LaneStats& stats_of(Channel& ch, std::int32_t lane) noexcept;

  // channel_connect.cpp (HandshakeHost: open_lanes, become_up)
  void open_lanes(Channel& ch, std::uint64_t now_ns) override;
  void become_up(Channel& ch, std::uint64_t now_ns) override;
  // Starts the bootstrap (lane -1) or a lane connect: Ok, or why not (then
  // the channel failed and was reported down, or a rebuilt lane dials again
  // later). A bootstrap refused here: Busy when no connection slot was free,
  // else PeerUnreachable.
  [[nodiscard]] Status start_connect(Channel& ch, std::int32_t lane, std::uint64_t now_ns);
  // A dial refused at once: its warning (those for want of a slot, Busy,
  // rate-limited: Opens waiting for a slot dial every 100 ms).
  void log_dial_failed(const Channel& ch, bool on_lanes, Status why, std::uint64_t now_ns);
  // Several rails: a lane's connect from its rail to the peer's.
  [[nodiscard]] Result<transport::ConnId> dial_lane(Channel& ch, std::uint32_t lane);
  // Several rails: which of the peer's rails lane `lane`'s connection
  // reaches (its remote address among the peer's handshake rail addresses),
  // for the keys of the peer's arenas (Lane::set_peer_rail). At every join.
  void note_peer_rail(Channel& ch, std::uint32_t lane) override;
  // Several rails: lanes that left a rail which is back move home (channel_tick).
  void rails_back(Channel& ch, std::uint64_t now_ns);
  void connected(Channel& ch, std::int32_t lane, transport::ConnId conn, std::uint64_t now_ns);
  // A lane's connect failed (`why`: Busy when no slot was free here, else
  // PeerUnreachable): a lane being rebuilt dials again after kLaneRedialNs
  // (rebuild_tick), one being set up fails the channel with `why`.
  void lane_connect_failed(Channel& ch, std::uint32_t lane, Status why, std::uint64_t now_ns);
  // connect_async's Connected (rdma lanes).
  void on_connected(const transport::Completion& c, bool on_lanes, std::uint64_t now_ns);
  static constexpr std::uint64_t kLaneRedialNs = 200'000'000;

  // channel_lifecycle.cpp
  void set_state(Channel& ch, ChannelState to, std::uint64_t now_ns) override;
  void fail(Channel& ch, Status why, std::uint64_t now_ns);
  void finish(Channel& ch, Status why, bool orderly, std::uint64_t now_ns);
  // A losing duplicate's initiator closes it once no endpoint uses it and
  // its lanes hold nothing unconfirmed (or peer-timeout after that).
  void close_if_unused(Channel& ch, std::uint64_t now_ns);
  void reap();
  // LaneFlowHost (with the public fail_channel): start_connect() for the lane flow.
  void redial_lane(Channel& ch, std::uint32_t lane, std::uint64_t now_ns) override {
    (void)start_connect(ch, static_cast<std::int32_t>(lane), now_ns);  // not Ok: failed and reported, or later
  }
  // Per Up channel each tick: liveness, rebuild deadlines and the
  // retransmission timeout, idle grants.
  void channel_tick(Channel& ch, std::uint64_t now_ns);

  // Channels on demand (channel_lifecycle.cpp).
  // Past max_channels: asks the peer to close the idlest idle channel.
  void evict_idle(std::uint64_t now_ns);
  // Nothing in flight on `ch` on our side: no endpoint or proxy, nothing
  // kept or queued on its lanes, no remote op of the engine's.
  bool idle(const Channel& ch);
  // A Goodbye carrying kIdleClose: the peer's request (Ok) or refusal (Busy).
  void on_idle_close(Channel& ch, Status status, std::uint64_t now_ns);
  // The peer agreed (its plain Goodbye while we ask): closes ours, and
  // opens a new channel at once when an Open waits for this one.
  void evicted(Channel& ch, std::uint64_t now_ns);
  // Our ask was refused or not answered: the channel carries work again.
  void keep(Channel& ch, std::uint64_t now_ns);

  transport::Transport& transport_;  // bootstrap connections
  transport::Transport& lanes_;      // data lanes (== transport_ unless split_)
  rails::RailSet* rails_ = nullptr;  // lanes_ itself, when the lanes run on several rails
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
  ChannelCredits credits_;  // before table_: the channels' lanes give back to its pool as they go
  ChannelTable table_;
  LaneFlow flow_;               // after credits_ and table_: it uses both
  ChannelHandshake handshake_;  // after flow_: it uses it
  std::array<transport::Completion, transport::kPollBatch> batch_{};
  std::uint64_t last_now_ns_ = 0;
  HeldControls held_;
  PeerKeyTable peer_keys_;
  // Dials refused for want of a slot: Opens waiting for one dial again
  // every 100 ms each, so their lines are rate-limited (the counter,
  // peer_dials_refused, has them all).
  transport::LogLimiter no_slot_log_;
  transport::LogLimiter peer_full_log_;  // peers that turned our dials away (Goodbye Busy)
  // A bootstrap dial found no free slot: until a connection closes here
  // (or kNoSlotHoldNs pass, should one close unseen), a new channel is
  // refused Busy without a dial, so the Opens waiting for a slot cost one
  // dial per interval between them, not one each. slot_wanted_: someone was
  // refused since the last close (on_slot_freed wakes them).
  static constexpr std::uint64_t kNoSlotHoldNs = 100'000'000;
  std::uint64_t no_slot_until_ns_ = 0;
  bool slot_wanted_ = false;
  bool changed_ = false;
};

}  // namespace ferry::daemon::peer
