// Channel protocol logic through the recording transport (protocol tests
// drive the real code through transport/testing/, never friend access):
// state machine, handshake checks, duplicate resolution, heartbeats and the
// dead-peer timeout failing in-flight operations with PeerReset.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "daemon/peer/channel_manager.h"
#include "daemon/remote/remote_ops.h"
#include "transport/testing/recording_transport.h"

using namespace ferry;
using namespace ferry::daemon;
using namespace ferry::daemon::peer;
using transport::testing::RecordingTransport;

namespace {

constexpr std::uint64_t kMs = 1'000'000;

struct Listener final : ChannelEvents {
  RemoteOpTable* ops = nullptr;
  std::vector<std::uint32_t> up;
  std::vector<std::pair<std::uint32_t, Status>> down;
  std::vector<wire::MsgType> messages;
  std::map<std::uint64_t, std::vector<Status>> completions;  // op token -> statuses
  void on_channel_up(Channel& ch) override { up.push_back(ch.id); }
  bool channel_idle(const Channel&) override { return true; }
  void on_channel_down(Channel& ch, Status why) override {
    down.emplace_back(ch.id, why);
    if (ops == nullptr) return;
    ops->sweep([&](std::uint64_t token, RemoteOp& op) {
      if (op.channel != ch.id) return false;
      completions[token].push_back(Status::PeerReset);
      return true;
    });
  }
  void on_message(Channel&, std::uint32_t, const wire::Header& h, const std::byte*) override {
    messages.push_back(h.type);
  }
  void on_send_done(std::uint64_t, Status) override {}
};

std::vector<std::byte> handshake(std::uint64_t epoch, std::uint16_t lanes = 1,
                                 std::uint16_t version = wire::kProtocolVersion, std::uint64_t caps = wire::kCapTcp) {
  wire::Handshake hs;
  hs.protocol_version = version;
  hs.qp_count = lanes;
  hs.daemon_epoch = epoch;
  hs.capabilities = caps;
  hs.initial_credits = 16;
  hs.max_message_bytes = 1u << 20;
  std::vector<std::byte> out(wire::handshake_bytes(hs));
  wire::encode_handshake(hs, out);
  return out;
}

wire::Header hello_header(wire::MsgType type, std::uint64_t token, Status status = Status::Ok) {
  wire::Header h;
  h.type = type;
  h.token = token;
  h.status = status;
  return h;
}

struct Rig {
  RecordingTransport t;
  Listener ev;
  Counters counters;
  ChannelConfig cfg;
  std::unique_ptr<ChannelManager> mgr;
  std::uint64_t now = 1000 * kMs;

  explicit Rig(std::uint64_t epoch) {
    cfg.epoch = epoch;
    cfg.heartbeat_ms = 100;
    cfg.peer_timeout_ms = 1000;
    cfg.connect_timeout_ms = 500;
    cfg.lanes = 1;
    mgr = std::make_unique<ChannelManager>(t, ev, cfg, counters);
  }
  // As after a wake by the transport: a manager with no channel looks at
  // its transport only every few polls otherwise.
  void pump() {
    mgr->woke(true);
    (void)mgr->poll(now);
  }

  // We connect to a peer of `peer_epoch`; bootstrap conn `boot`, lane `lane_conn`.
  std::uint32_t connect_up(std::uint64_t peer_epoch, transport::ConnId boot = 1, transport::ConnId lane_conn = 2) {
    t.set_connect_result(Result<transport::ConnId>::ok(boot));
    auto r = mgr->connect("198.18.0.2:7000", "198.18.0.2", 7000, now);
    REQUIRE(r);
    t.set_connect_result(Result<transport::ConnId>::ok(lane_conn));
    t.inject_recv(boot, hello_header(wire::MsgType::HelloAck, 0), handshake(peer_epoch));
    pump();
    t.inject_recv(lane_conn, hello_header(wire::MsgType::HelloAck, 1), handshake(peer_epoch));
    pump();
    return r.value;
  }

  // A peer of `peer_epoch` connects to us.
  std::uint32_t accept_up(std::uint64_t peer_epoch, transport::ConnId boot, transport::ConnId lane_conn) {
    for (transport::ConnId c : {boot, lane_conn}) {
      transport::Completion a;
      a.kind = transport::CompletionKind::Accepted;
      a.conn = c;
      t.inject(a);
    }
    t.inject_recv(boot, hello_header(wire::MsgType::Hello, 0), handshake(peer_epoch));
    t.inject_recv(lane_conn, hello_header(wire::MsgType::Hello, 1), handshake(peer_epoch));
    pump();
    REQUIRE(!ev.up.empty());
    return ev.up.back();
  }

  std::size_t count_sent(wire::MsgType type, transport::ConnId conn = 0) const {
    std::size_t n = 0;
    for (const auto& s : t.sent()) {
      if (s.header.type == type && (conn == 0 || s.conn == conn)) ++n;
    }
    return n;
  }
};

}  // namespace

TEST_CASE("channel state machine: legal transitions only, names for every state", "[channel]") {
  using S = ChannelState;
  CHECK(can_transition(S::Connecting, S::Handshaking));
  CHECK(can_transition(S::Handshaking, S::Up));
  CHECK(can_transition(S::Up, S::Draining));
  CHECK(can_transition(S::Draining, S::Down));
  CHECK(can_transition(S::Up, S::Failed));
  CHECK_FALSE(can_transition(S::Connecting, S::Up));  // no skipping the handshake
  CHECK_FALSE(can_transition(S::Down, S::Up));        // terminal
  CHECK_FALSE(can_transition(S::Failed, S::Handshaking));
  CHECK_FALSE(can_transition(S::Draining, S::Up));
  for (auto s : {S::Connecting, S::Handshaking, S::Up, S::Draining, S::Down, S::Failed}) {
    CHECK(to_string(s) != "Unknown");
  }
}

TEST_CASE("initiator: Hello, HelloAck, lane Hello, Up", "[channel]") {
  Rig rig(100);
  const std::uint32_t id = rig.connect_up(50);
  REQUIRE(rig.ev.up == std::vector<std::uint32_t>{id});
  Channel* ch = rig.mgr->find(id);
  REQUIRE(ch != nullptr);
  CHECK(ch->state == ChannelState::Up);
  CHECK(ch->peer_epoch == 50);
  CHECK(ch->lane_count == 1);
  // Bootstrap Hello (token 0) then the lane's Hello (token 1), on their own connections.
  REQUIRE(rig.t.sent().size() >= 2);
  CHECK(rig.t.sent()[0].header.type == wire::MsgType::Hello);
  CHECK(rig.t.sent()[0].header.token == 0);
  CHECK(rig.t.sent()[0].conn == 1);
  CHECK(rig.t.sent()[1].header.type == wire::MsgType::Hello);
  CHECK(rig.t.sent()[1].header.token == 1);
  CHECK(rig.t.sent()[1].conn == 2);
  CHECK(read(rig.counters.peer_connects) == 1);
  // get-or-create: the same address reuses the channel.
  auto again = rig.mgr->connect("198.18.0.2:7000", "198.18.0.2", 7000, rig.now);
  REQUIRE(again);
  CHECK(again.value == id);
}

TEST_CASE("handshake: refused version fails the channel with VersionMismatch", "[channel]") {
  Rig rig(100);
  auto r = rig.mgr->connect("198.18.0.2:7000", "198.18.0.2", 7000, rig.now);
  REQUIRE(r);
  rig.t.inject_recv(1, hello_header(wire::MsgType::HelloAck, 0, Status::VersionMismatch), handshake(50));
  rig.pump();
  REQUIRE(rig.ev.down.size() == 1);
  CHECK(rig.ev.down[0].second == Status::VersionMismatch);
  CHECK(rig.ev.up.empty());
  CHECK(read(rig.counters.peer_failures) == 1);
}

TEST_CASE("handshake: a Hello carrying our own epoch is refused", "[channel]") {
  Rig rig(100);
  transport::Completion a;
  a.kind = transport::CompletionKind::Accepted;
  a.conn = 9;
  rig.t.inject(a);
  rig.t.inject_recv(9, hello_header(wire::MsgType::Hello, 0), handshake(100));
  rig.pump();
  REQUIRE(rig.count_sent(wire::MsgType::HelloAck, 9) == 1);
  CHECK(rig.t.sent().back().header.status == Status::BadRequest);
  CHECK(std::find(rig.t.closed().begin(), rig.t.closed().end(), 9u) != rig.t.closed().end());
  CHECK(rig.mgr->channel_count() == 0);
}

TEST_CASE("handshake: a peer whose data lanes run on another transport is refused or failed", "[channel]") {
  SECTION("acceptor: an rdma-only Hello to our tcp lanes gets NotSupported") {
    Rig rig(100);
    transport::Completion a;
    a.kind = transport::CompletionKind::Accepted;
    a.conn = 9;
    rig.t.inject(a);
    rig.t.inject_recv(9, hello_header(wire::MsgType::Hello, 0),
                      handshake(50, 1, wire::kProtocolVersion, wire::kCapRdma));
    rig.pump();
    REQUIRE(rig.count_sent(wire::MsgType::HelloAck, 9) == 1);
    CHECK(rig.t.sent().back().header.status == Status::NotSupported);
    CHECK(rig.mgr->channel_count() == 0);
  }
  SECTION("initiator: an rdma-only HelloAck fails the channel with NotSupported, no lane opened") {
    Rig rig(100);
    auto r = rig.mgr->connect("198.18.0.2:7000", "198.18.0.2", 7000, rig.now);
    REQUIRE(r);
    rig.t.inject_recv(1, hello_header(wire::MsgType::HelloAck, 0),
                      handshake(50, 1, wire::kProtocolVersion, wire::kCapRdma));
    rig.pump();
    REQUIRE(rig.ev.down.size() == 1);
    CHECK(rig.ev.down[0].second == Status::NotSupported);
    CHECK(rig.ev.up.empty());
    CHECK(rig.count_sent(wire::MsgType::Hello, 2) == 0);
  }
}

TEST_CASE("handshake: a lane Hello for no channel is refused; data before Hello closes", "[channel]") {
  Rig rig(100);
  transport::Completion a;
  a.kind = transport::CompletionKind::Accepted;
  a.conn = 11;
  rig.t.inject(a);
  rig.t.inject_recv(11, hello_header(wire::MsgType::Hello, 1), handshake(50));
  rig.pump();
  REQUIRE(rig.count_sent(wire::MsgType::HelloAck, 11) == 1);
  CHECK(rig.t.sent().back().header.status == Status::ProtocolError);
  CHECK(rig.mgr->channel_count() == 0);
}

TEST_CASE("handshake that never finishes fails with PeerUnreachable at the deadline", "[channel]") {
  Rig rig(100);
  auto r = rig.mgr->connect("198.18.0.2:7000", "198.18.0.2", 7000, rig.now);
  REQUIRE(r);
  rig.mgr->tick(rig.now + 499 * kMs);
  CHECK(rig.ev.down.empty());
  rig.mgr->tick(rig.now + 501 * kMs);
  REQUIRE(rig.ev.down.size() == 1);
  CHECK(rig.ev.down[0].second == Status::PeerUnreachable);
}

TEST_CASE("duplicate channels: both keep the one initiated by the lower epoch", "[channel]") {
  SECTION("we have the higher epoch: our initiated channel loses and closes") {
    Rig rig(100);
    const std::uint32_t ours = rig.connect_up(50, 1, 2);
    const std::uint32_t theirs = rig.accept_up(50, 7, 8);
    REQUIRE(rig.mgr->find(theirs) != nullptr);
    CHECK(rig.mgr->find(theirs)->state == ChannelState::Up);
    CHECK(rig.mgr->find(ours) == nullptr);  // closed and reaped
    // The loser had no endpoints: closed in an orderly way (Goodbye, Down).
    CHECK(rig.count_sent(wire::MsgType::Goodbye, 1) == 1);
    REQUIRE(rig.ev.down.size() == 1);
    CHECK(rig.ev.down[0].first == ours);
    // The address now leads to the winner.
    auto again = rig.mgr->connect("198.18.0.2:7000", "198.18.0.2", 7000, rig.now);
    REQUIRE(again);
    CHECK(again.value == theirs);
  }
  SECTION("we have the lower epoch: our channel wins, theirs drains and waits for its initiator") {
    Rig rig(10);
    const std::uint32_t ours = rig.connect_up(50, 1, 2);
    const std::uint32_t theirs = rig.accept_up(50, 7, 8);
    REQUIRE(rig.mgr->route(theirs) != nullptr);
    CHECK(rig.mgr->route(theirs)->id == ours);
    CHECK(rig.mgr->find(theirs)->state == ChannelState::Draining);
    CHECK(rig.mgr->find(ours)->state == ChannelState::Up);
    CHECK(rig.ev.down.empty());  // the peer closes its own loser
  }
}

TEST_CASE("a losing duplicate closes only once what it sent is confirmed", "[channel]") {
  // Closing it while a message waits for the peer's ack would fail that
  // message with PeerReset although the peer may have it (a Reply the
  // caller already got): seen as a rare mesh failure.
  Rig rig(100);
  rig.t.auto_complete_sends(true);
  const std::uint32_t ours = rig.connect_up(50, 1, 2);
  Channel* ch = rig.mgr->find(ours);
  REQUIRE(ch != nullptr);
  rig.mgr->bind_endpoint(*ch);
  wire::Header send;
  send.type = wire::MsgType::Send;
  send.src_ep = send.dst_ep = 1;
  const std::byte payload[8]{};
  REQUIRE(rig.mgr->send(*ch, 0, send, payload, sizeof payload, 77, true).accepted == 1);
  rig.pump();  // its SendDone: posted and written, not yet confirmed
  rig.accept_up(50, 7, 8);
  REQUIRE(rig.mgr->find(ours) != nullptr);
  CHECK(rig.mgr->find(ours)->state == ChannelState::Draining);  // has an endpoint
  rig.mgr->unbind_endpoint(*rig.mgr->find(ours));
  rig.mgr->tick(rig.now);
  REQUIRE(rig.mgr->find(ours) != nullptr);  // the Send is unconfirmed: still there
  CHECK(rig.count_sent(wire::MsgType::Goodbye, 1) == 0);
  wire::Header ack;
  ack.type = wire::MsgType::Credit;
  ack.ack = 1;  // the peer got lane_seq 1
  rig.t.inject_recv(2, ack, {});
  rig.pump();
  rig.mgr->tick(rig.now);
  CHECK(rig.count_sent(wire::MsgType::Goodbye, 1) == 1);
  CHECK(rig.mgr->find(ours) == nullptr);
  REQUIRE(rig.ev.down.size() == 1);
  CHECK(rig.ev.down[0].first == ours);
}

TEST_CASE("heartbeats: ping on the bootstrap connection, pong gives the RTT", "[channel]") {
  Rig rig(100);
  const std::uint32_t id = rig.connect_up(50);
  rig.t.clear_sent();
  rig.mgr->tick(rig.now);
  REQUIRE(rig.count_sent(wire::MsgType::Heartbeat, 1) == 1);
  wire::Header ping = rig.t.sent().back().header;
  CHECK(ping.ack == 0);
  wire::Header pong = ping;
  pong.ack = 1;
  rig.now += 3 * kMs;
  rig.t.inject_recv(1, pong);
  rig.pump();
  CHECK(rig.mgr->find(id)->rtt_us == 3000);
  // The peer's ping is answered with a pong echoing its token.
  wire::Header theirs;
  theirs.type = wire::MsgType::Heartbeat;
  theirs.token = 4242;
  rig.t.inject_recv(1, theirs);
  rig.pump();
  REQUIRE(rig.t.sent().back().header.type == wire::MsgType::Heartbeat);
  CHECK(rig.t.sent().back().header.token == 4242);
  CHECK(rig.t.sent().back().header.ack == 1);
}

TEST_CASE("heartbeats: a channel that hears its peer pings only for the RTT; a silent one within half an interval",
          "[channel]") {
  Rig rig(100);
  const std::uint32_t id = rig.connect_up(50);
  auto our_pings = [&rig](std::size_t from) {
    std::size_t n = 0;
    for (std::size_t i = from; i < rig.t.sent().size(); ++i) {
      const auto& s = rig.t.sent()[i];
      n += s.conn == 1 && s.header.type == wire::MsgType::Heartbeat && s.header.ack == 0;
    }
    return n;
  };
  rig.mgr->tick(rig.now);
  CHECK(our_pings(0) == 1);  // the first right away: an RTT early
  // The peer's pings arrive every 40 ms (they, like any traffic, prove it
  // alive): over 16 intervals we ping twice, for the RTT (every 8), and
  // answer each of theirs.
  std::size_t mark = rig.t.sent().size();
  for (int step = 1; step <= 160; ++step) {
    rig.now += 10 * kMs;
    if (step % 4 == 0) {
      wire::Header theirs;
      theirs.type = wire::MsgType::Heartbeat;
      theirs.token = rig.now;
      rig.t.inject_recv(1, theirs);
      rig.pump();
    }
    rig.mgr->tick(rig.now);
  }
  CHECK(our_pings(mark) == 2);
  CHECK(read(rig.counters.heartbeats_missed) == 0);
  // Silence: the next ping goes within an interval (and a tick) of the
  // last word, then one per interval; none is counted missed while the
  // pongs come back.
  mark = rig.t.sent().size();
  std::uint64_t first_ping_ms = 0;
  for (int step = 1; step <= 60; ++step) {
    rig.now += 10 * kMs;
    const std::size_t before = rig.t.sent().size();
    rig.mgr->tick(rig.now);
    if (our_pings(before) == 1) {
      if (first_ping_ms == 0) first_ping_ms = static_cast<std::uint64_t>(step) * 10;
      wire::Header pong = rig.t.sent().back().header;
      pong.ack = 1;
      rig.t.inject_recv(1, pong);
      rig.pump();
    }
  }
  CHECK(first_ping_ms > 0);
  CHECK(first_ping_ms <= 110);
  const std::size_t pings = our_pings(mark);
  CHECK(pings >= 5);
  CHECK(pings <= 6);
  CHECK(read(rig.counters.heartbeats_missed) == 0);
  CHECK(rig.mgr->find(id)->state == ChannelState::Up);
}

TEST_CASE("dead-peer timeout fails every in-flight op with PeerReset exactly once", "[channel]") {
  Rig rig(100);
  RemoteOpTable ops(16);
  rig.ev.ops = &ops;
  const std::uint32_t id = rig.connect_up(50);
  std::vector<std::uint64_t> tokens;
  for (int i = 0; i < 5; ++i) {
    RemoteOp op;
    op.kind = i % 2 ? RemoteOpKind::Call : RemoteOpKind::Send;
    op.channel = id;
    tokens.push_back(ops.insert(op));
  }
  RemoteOp other;
  other.channel = id + 100;  // another channel's op is untouched
  const std::uint64_t untouched = ops.insert(other);

  // Silent but within the timeout: missed heartbeats are counted, no failure.
  rig.mgr->tick(rig.now + 250 * kMs);
  CHECK(rig.ev.down.empty());
  CHECK(read(rig.counters.heartbeats_missed) >= 1);
  rig.mgr->tick(rig.now + 1001 * kMs);
  REQUIRE(rig.ev.down.size() == 1);
  CHECK(rig.ev.down[0] == std::make_pair(id, Status::PeerReset));
  for (std::uint64_t t : tokens) {
    REQUIRE(rig.ev.completions[t].size() == 1);
    CHECK(rig.ev.completions[t][0] == Status::PeerReset);
  }
  CHECK(rig.ev.completions.count(untouched) == 0);
  CHECK(ops.size() == 1);
  CHECK(rig.mgr->find(id) == nullptr);  // a restarted peer gets a new channel
  // Later ticks do not report it again.
  rig.mgr->tick(rig.now + 3000 * kMs);
  CHECK(rig.ev.down.size() == 1);
}

TEST_CASE("a reset bootstrap connection fails the channel; traffic reaches the engine only when Up", "[channel]") {
  Rig rig(100);
  const std::uint32_t id = rig.connect_up(50);
  wire::Header send;
  send.type = wire::MsgType::Send;
  send.src_ep = 1;
  send.dst_ep = 2;
  send.lane_seq = 1;
  rig.t.inject_recv(2, send);
  rig.pump();
  CHECK(rig.ev.messages == std::vector<wire::MsgType>{wire::MsgType::Send});
  // A data lane's reset alone is rebuilt (rebuild_test.cpp); the bootstrap
  // connection carries liveness: its loss ends the channel.
  transport::Completion closed;
  closed.kind = transport::CompletionKind::Closed;
  closed.status = Status::PeerReset;
  closed.conn = 1;
  rig.t.inject(closed);
  rig.pump();
  REQUIRE(rig.ev.down.size() == 1);
  CHECK(rig.ev.down[0] == std::make_pair(id, Status::PeerReset));
  CHECK(read(rig.counters.peer_failures) == 1);
}
