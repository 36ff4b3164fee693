// Receive credits on the data lanes (daemon/peer/lane.cpp), through the
// recording transport (transport/testing/): initial credits from the
// handshake, the backlog and its release, grants only after the next poll,
// explicit Credit messages for one-way traffic, bad grants, and backlogged
// WRs failing exactly once. Two ChannelManagers wired back to back simulate
// both daemons, with a model of the receive queues that fails on any RNR.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "daemon/peer/peer_status_json.h"
#include "tests/unit/daemon/channel_pair.h"

using namespace ferry;
using namespace ferry::daemon;
using namespace ferry::daemon::peer;
using transport::testing::RecordingTransport;
using namespace ferry::daemon::peer::testing;

TEST_CASE("credits: initial credits come from the peer's handshake; ours are the lane transport's recv_depth",
          "[credits]") {
  SECTION("initiator") {
    Side a(100, 64);
    const std::uint32_t id = a.connect_up(16);
    // Our Hello says how many receives our lanes post.
    wire::Handshake ours;
    REQUIRE(a.t.sent().size() >= 2);
    REQUIRE(wire::decode_handshake(a.t.sent()[1].payload, ours) == wire::WireError::None);
    CHECK(ours.initial_credits == 64);
    // The peer's 16, less the lane Hello we sent it.
    CHECK(a.lane(id).stats().credits == 15);
    CHECK(a.lane(id).peer_credits() == 16);
    // The peer's HelloAck used a receive of ours: owed once reposted.
    CHECK(a.lane(id).stats().credits_owed == 0);
    a.pump();
    CHECK(a.lane(id).stats().credits_owed == 1);
  }
  SECTION("acceptor") {
    Side b(100);
    for (transport::ConnId c : {11u, 12u}) {
      transport::Completion acc;
      acc.kind = transport::CompletionKind::Accepted;
      acc.conn = c;
      b.t.inject(acc);
    }
    b.t.inject_recv(11, header(wire::MsgType::Hello), handshake(50, 32));
    b.t.inject_recv(12, header(wire::MsgType::Hello, 1), handshake(50, 32));
    b.pump();
    REQUIRE(b.ev.log == std::vector<std::string>{"up"});
    Channel* ch = b.mgr->find(1);
    REQUIRE(ch != nullptr);
    wire::Handshake ack;
    REQUIRE(b.t.sent().back().header.type == wire::MsgType::HelloAck);
    REQUIRE(wire::decode_handshake(b.t.sent().back().payload, ack) == wire::WireError::None);
    CHECK(ack.initial_credits == 128);
    CHECK(ch->lanes[0].stats().credits == 31);  // less our HelloAck
    b.pump();
    CHECK(ch->lanes[0].stats().credits_owed == 1);  // the lane Hello
  }
}

TEST_CASE("credits: posting beyond the credits backlogs, a grant releases the backlog in order", "[credits]") {
  Side a(100);
  const std::uint32_t id = a.connect_up(4);  // 3 after the Hello; 1 of them is the reserve
  a.t.clear_sent();
  for (std::uint64_t tok = 1; tok <= 6; ++tok) {
    const auto r = a.send(id, tok);
    CHECK(r.accepted == 1);  // queued WRs count as accepted
  }
  CHECK(a.sent_tokens(wire::MsgType::Send, 2) == std::vector<std::uint64_t>{1, 2});
  CHECK(a.lane(id).stats().credits == 1);
  CHECK(a.lane(id).stats().backlog == 4);
  CHECK(a.lane(id).stats().credit_stalls == 4);
  CHECK(read(a.counters.credit_stalls) == 4);

  // An RDMA READ needs no credit, but waits behind the backlog (lane order).
  transport::SendWr rd;
  rd.op = transport::WrOp::RdmaRead;
  rd.user_data = 77;
  CHECK(a.mgr->post(*a.mgr->find(id), 0, rd).accepted == 1);
  CHECK(a.lane(id).stats().backlog == 5);

  // The peer grants 2 (on a Credit message): two more go, in order.
  a.t.inject_recv(2, header(wire::MsgType::Credit, 0, 2));
  a.pump();
  CHECK(a.sent_tokens(wire::MsgType::Send, 2) == std::vector<std::uint64_t>{1, 2, 3, 4});
  CHECK(a.lane(id).stats().backlog == 3);
  CHECK(a.ev.messages.empty());  // a Credit message never reaches the engine

  // The rest, grant by grant; the READ goes right after token 6.
  a.t.inject_recv(2, header(wire::MsgType::Credit, 0, 1));
  a.pump();
  CHECK(a.sent_tokens(wire::MsgType::Send, 2) == std::vector<std::uint64_t>{1, 2, 3, 4, 5});
  a.t.inject_recv(2, header(wire::MsgType::Credit, 0, 1));
  a.pump();
  CHECK(a.sent_tokens(wire::MsgType::Send, 2) == std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6});
  CHECK(a.lane(id).stats().backlog == 0);
  REQUIRE(!a.t.sent().empty());
  CHECK(a.t.sent().back().op == transport::WrOp::RdmaRead);
  CHECK(a.t.sent().back().user_data == 77);
  CHECK(a.lane(id).stats().credits == 1);  // the reserve stays
  CHECK(read(a.counters.credit_stalls) == 5);
  CHECK(a.ev.down.empty());

  SECTION("backlog full: Busy, nothing queued") {
    std::size_t accepted = 0;
    transport::PostResult last;
    for (std::uint32_t i = 0; i < ChannelManager::kBacklogCapacity + 5; ++i) {
      // has_room answers exactly what the post does (the engine asks it
      // before opening memory windows).
      const bool room = a.mgr->has_room(*a.mgr->find(id), 0);
      last = a.send(id, 1000 + i);
      CHECK(room == (last.accepted == 1));
      accepted += last.accepted;
    }
    // The ring holds posted-unconfirmed and waiting WRs together.
    const std::uint32_t posted = a.lane(id).stats().unconfirmed;
    CHECK(posted != 0);
    CHECK(accepted + posted == ChannelManager::kBacklogCapacity);
    CHECK(last.accepted == 0);
    CHECK(last.status == Status::Busy);
    CHECK(a.lane(id).stats().backlog + posted == ChannelManager::kBacklogCapacity);
  }
}

TEST_CASE("credits: a receive is granted only after the next poll reposted it", "[credits]") {
  Side a(100);
  const std::uint32_t id = a.connect_up(16);
  a.pump();  // the HelloAck's receive is reposted
  a.mgr->tick(a.now);
  REQUIRE(a.sent_tokens(wire::MsgType::Credit, 2).size() == 1);  // idle: granted explicitly
  CHECK(a.t.sent().back().header.credit == 1);
  CHECK(a.lane(id).stats().credits_owed == 0);
  a.t.clear_sent();

  wire::Header first = header(wire::MsgType::Send, 5);
  first.lane_seq = 1;
  a.t.inject_recv(2, first);
  a.pump();  // delivered in this poll: its receive is reposted by the next one
  CHECK(a.ev.messages.size() == 1);
  CHECK(a.lane(id).stats().credits_owed == 0);
  a.mgr->tick(a.now);
  CHECK(a.sent_tokens(wire::MsgType::Credit, 2).empty());
  REQUIRE(a.send(id, 9).accepted == 1);
  CHECK(a.t.sent().back().header.credit == 0);  // nothing grantable yet

  a.pump();
  CHECK(a.lane(id).stats().credits_owed == 1);
  REQUIRE(a.send(id, 10).accepted == 1);
  CHECK(a.t.sent().back().header.credit == 1);  // piggybacked
  CHECK(a.lane(id).stats().credits_owed == 0);
  a.mgr->tick(a.now);
  CHECK(a.sent_tokens(wire::MsgType::Credit, 2).empty());  // nothing left to grant
}

TEST_CASE("credits: a grant beyond the peer's initial credits fails the channel", "[credits]") {
  Side a(100);
  const std::uint32_t id = a.connect_up(16);
  REQUIRE(a.lane(id).stats().credits == 15);
  a.t.inject_recv(2, header(wire::MsgType::Credit, 0, 1));  // gives back the lane Hello's receive: fine
  a.pump();
  CHECK(a.ev.down.empty());
  CHECK(a.lane(id).stats().credits == 16);
  SECTION("on a Credit message") { a.t.inject_recv(2, header(wire::MsgType::Credit, 0, 1)); }
  SECTION("piggybacked on data") { a.t.inject_recv(2, header(wire::MsgType::Send, 3, 1)); }
  a.pump();
  REQUIRE(a.ev.down.size() == 1);
  CHECK(a.ev.down[0] == std::make_pair(id, Status::ProtocolError));
  CHECK(a.ev.messages.empty());  // the offending message is not delivered
  CHECK(a.mgr->find(id) == nullptr);
}

TEST_CASE("credits: a failing channel completes each backlogged WR once, before it is reported down", "[credits]") {
  Side a(100);
  const std::uint32_t id = a.connect_up(4);
  for (std::uint64_t tok = 101; tok <= 105; ++tok) REQUIRE(a.send(id, tok).accepted == 1);
  REQUIRE(a.lane(id).stats().backlog == 3);  // 101, 102 went out (unsignaled: their ops fail with the channel)
  transport::Completion closed;
  closed.kind = transport::CompletionKind::Closed;
  closed.status = Status::PeerReset;
  closed.conn = 1;  // the bootstrap: a lane alone would be rebuilt
  a.t.inject(closed);
  a.pump();
  CHECK(a.ev.log == std::vector<std::string>{"up", "done:103", "done:104", "done:105", "down"});
  for (const auto& [user_data, status] : a.ev.done) CHECK(status == Status::PeerReset);
  a.pump();
  a.mgr->tick(a.now + 10 * kMs);
  CHECK(a.ev.done.size() == 3);
  CHECK(read(a.counters.credit_stalls) == 3);
}

TEST_CASE("credits: one-way traffic is paced by explicit Credit messages, never beyond the peer's receives",
          "[credits]") {
  const std::uint32_t depth = GENERATE(128u, 16u);
  INFO("receiver depth " << depth);
  Pair p(depth);
  const std::uint32_t id = p.up();
  constexpr std::uint64_t kMessages = 1000;  // ~8x the peer's receives, within the backlog
  for (std::uint64_t tok = 1; tok <= kMessages; ++tok) REQUIRE(p.a.send(id, tok).accepted == 1);
  CHECK(p.a.lane(id).stats().backlog > 0);
  for (int i = 0; i < 2000 && p.b.ev.messages.size() < kMessages; ++i) p.step();

  REQUIRE(p.b.ev.messages.size() == kMessages);
  for (std::uint64_t i = 0; i < kMessages; ++i) REQUIRE(p.b.ev.messages[i].token == i + 1);  // in order
  CHECK(p.rnr == 0);
  CHECK(p.b_rx.min_free >= 0);
  CHECK(p.b_rx.min_free < depth / 2);  // the window was really used, not just trickled
  const std::size_t credits_sent = count(p.b.t.sent(), wire::MsgType::Credit);
  CHECK(credits_sent >= kMessages / depth);  // explicit grants: the peer had nothing to piggyback on
  CHECK(read(p.a.counters.credit_stalls) > 0);
  CHECK(p.a.lane(id).stats().backlog == 0);
  CHECK(p.a.ev.down.empty());
  CHECK(p.b.ev.down.empty());

  // Idle: ticks settle what is owed, then the two sides fall silent (no
  // endless one-credit Credit ping-pong).
  for (int i = 0; i < 10; ++i) p.quiet_round(20);
  const std::size_t a_mark = p.a.t.sent().size(), b_mark = p.b.t.sent().size();
  for (int i = 0; i < 10; ++i) p.quiet_round(20);
  CHECK(count(p.a.t.sent(), wire::MsgType::Credit, a_mark) == 0);
  CHECK(count(p.b.t.sent(), wire::MsgType::Credit, b_mark) == 0);
  CHECK(p.rnr == 0);
  // Everything the data used was given back: the sender holds all but the
  // receives its own Credit messages took.
  CHECK(p.a.lane(id).stats().credits + p.b.mgr->find(1)->lanes[0].stats().credits_owed >= depth - 1);
}

TEST_CASE("credits: status JSON shows lane credits and the channel window", "[credits]") {
  Side a(100);
  const std::uint32_t id = a.connect_up(4);
  for (std::uint64_t tok = 1; tok <= 4; ++tok) REQUIRE(a.send(id, tok).accepted == 1);
  a.counters.rnr_naks.store(0);
  std::vector<PeerInfo> peers;
  a.mgr->snapshot(peers, a.now);
  REQUIRE(peers.size() == 1);
  peers[0].window_ops = 3;  // the remote sender's books (send_windows.h), filled in by the engine
  peers[0].window_stalls = 2;
  const json::Value v = peers_json(peers);
  const json::Array* arr = v.as_array();
  REQUIRE(arr != nullptr);
  REQUIRE(arr->size() == 1);
  const json::Value& peer = (*arr)[0];
  for (const char* k : {"window_ops", "window_bytes", "window_stalls", "reads_inflight", "rnr_naks", "lane_credits",
                        "lane_credits_owed", "lane_backlog", "lane_credit_stalls", "qps", "rtt_us"}) {
    INFO(k);
    CHECK(peer.find(k) != nullptr);
  }
  CHECK(json::dump(*peer.find("window_ops")) == "3");
  CHECK(json::dump(*peer.find("window_stalls")) == "2");
  CHECK(json::dump(*peer.find("lane_backlog")) == "[2]");
  const json::Value& lane = (*peer.find("channels")->as_array())[0];
  CHECK(json::dump(*lane.find("credits")) == "1");
  CHECK(json::dump(*lane.find("backlog")) == "2");
  CHECK(json::dump(*lane.find("credit_stalls")) == "2");
  CHECK(lane.find("credits_owed") != nullptr);
}

TEST_CASE("credits: with a pool, a message no grant answers is still acknowledged within two ticks", "[credits]") {
  // After a burst the sender holds more credits than the receiver's pool
  // wants to lend an idle lane, so the receives the last messages used go
  // back to the pool, not to the sender: nothing carries the ack. Without
  // an ack of its own the sender's lane never settles (a Draining
  // duplicate then lingers until the peer timeout).
  Pair p(128, 8);
  const std::uint32_t id = p.up();
  REQUIRE(p.a.lane(id).pooled());
  std::uint64_t tok = 1;
  for (; tok <= 60; ++tok) REQUIRE(p.a.send(id, tok).accepted == 1);
  for (int i = 0; i < 50 && p.b.ev.messages.size() < 60; ++i) p.step();
  REQUIRE(p.b.ev.messages.size() == 60);
  for (int i = 0; i < 5; ++i) p.quiet_round(10);
  CHECK(p.a.lane(id).settled());

  for (int k = 0; k < 3; ++k, ++tok) {
    REQUIRE(p.a.send(id, tok).accepted == 1);
    p.step();
    p.quiet_round(10);
    p.quiet_round(10);
    p.quiet_round(10);
    INFO("message " << tok);
    CHECK(p.a.lane(id).settled());
  }
  // Acks are delayed, not chattering: an idle pair's lanes fall silent
  // (heartbeats go on, on the bootstrap connection).
  const std::size_t a_mark = p.a.t.sent().size(), b_mark = p.b.t.sent().size();
  for (int i = 0; i < 10; ++i) p.quiet_round(10);
  CHECK(count(p.a.t.sent(), wire::MsgType::Credit, a_mark) == 0);
  CHECK(count(p.b.t.sent(), wire::MsgType::Credit, b_mark) == 0);
  CHECK(count(p.a.t.sent(), wire::MsgType::Heartbeat, a_mark) + count(p.b.t.sent(), wire::MsgType::Heartbeat, b_mark) ==
        p.a.t.sent().size() - a_mark + p.b.t.sent().size() - b_mark);
  CHECK(p.rnr == 0);
  CHECK(p.a.ev.down.empty());
  CHECK(p.b.ev.down.empty());
}
