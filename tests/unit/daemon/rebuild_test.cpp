// Lane rebuild and retransmission (daemon/peer/channel_rebuild.cpp,
// channel_lane_queue.cpp) through recording transports: a broken lane is
// replaced through the bootstrap connection, the messages the peer did not
// get go again once and in order, duplicates are dropped by lane_seq, a gap
// or a message left unacknowledged breaks the lane, and nothing completes
// twice.
#include <catch2/catch.hpp>

#include <map>

#include "tests/unit/daemon/channel_pair.h"

using namespace ferry;
using namespace ferry::daemon;
using namespace ferry::daemon::peer;
using namespace ferry::daemon::peer::testing;

namespace {

transport::Completion closed_on(transport::ConnId conn) {
  transport::Completion c;
  c.kind = transport::CompletionKind::Closed;
  c.status = Status::PeerReset;
  c.conn = conn;
  return c;
}

// Ticks and steps until nothing is owed any more.
void settle(Pair& p, int rounds = 20) {
  for (int i = 0; i < rounds; ++i) {
    p.a.now += 20 * kMs;
    p.b.now += 20 * kMs;
    p.a.mgr->tick(p.a.now);
    p.b.mgr->tick(p.b.now);
    p.step();
  }
}

}  // namespace

TEST_CASE("rebuild: a broken lane is replaced; what the peer missed goes again once, in order", "[rebuild]") {
  Pair p;
  const std::uint32_t id = p.up();
  p.a.t.auto_complete_sends(true);  // signaled WRs finish at once, like a tcp write
  auto send = [&](std::uint64_t tok) {
    return p.a.mgr->send(*p.a.mgr->find(id), 0, header(wire::MsgType::Send, tok), nullptr, 0, tok, true);
  };
  for (std::uint64_t tok = 1; tok <= 10; ++tok) REQUIRE(send(tok).accepted == 1);
  for (int i = 0; i < 4; ++i) p.step();
  REQUIRE(p.b.ev.messages.size() == 10);
  CHECK(p.a.ev.done.empty());  // written, but not confirmed by the peer yet

  // Five more: two arrive, three are lost with the connection.
  for (std::uint64_t tok = 11; tok <= 15; ++tok) REQUIRE(send(tok).accepted == 1);
  p.ship(p.a, p.a_shipped, p.b, p.b_rx, true, 2);
  Pair::poll(p.b, p.b_rx);
  p.a_shipped = p.a.t.sent().size();
  REQUIRE(p.b.ev.messages.size() == 12);

  p.a.t.set_connect_result(Result<transport::ConnId>::ok(3));  // the new lane connection
  p.a.t.inject(closed_on(2));
  p.b.t.inject(closed_on(12));
  p.a.pump();
  p.b.pump();
  p.a.pump();  // the new connection comes up (connect_async): the rejoin Hello goes
  CHECK(p.a.mgr->find(id)->state == ChannelState::Up);  // the channel lives on
  CHECK(p.a.mgr->find(id)->lanes[0].broken);
  const auto& rejoin = p.a.t.sent().back();
  CHECK(rejoin.conn == 3);
  CHECK(rejoin.header.type == wire::MsgType::Hello);
  CHECK((rejoin.header.flags & wire::kFlagRetransmit) != 0);
  settle(p);

  REQUIRE(p.b.ev.messages.size() == 15);
  for (std::uint64_t i = 0; i < 15; ++i) CHECK(p.b.ev.messages[i].token == i + 1);
  std::map<std::uint64_t, int> done;
  for (const auto& [user_data, status] : p.a.ev.done) {
    CHECK(status == Status::Ok);
    ++done[user_data];
  }
  CHECK(done.size() == 15);
  for (const auto& [user_data, n] : done) CHECK(n == 1);
  CHECK(read(p.a.counters.retransmits) == 3);
  CHECK(read(p.a.counters.recoveries) == 1);
  CHECK(read(p.b.counters.recoveries) == 1);
  CHECK(read(p.b.counters.duplicates_dropped) == 0);
  CHECK(p.a.ev.down.empty());
  CHECK(p.b.ev.down.empty());
  CHECK(p.a.mgr->find(id)->lanes[0].stats.unconfirmed == 0);

  // Traffic flows on the new connection both ways.
  REQUIRE(p.b.mgr->send(*p.b.mgr->find(1), 0, header(wire::MsgType::Send, 99), nullptr, 0, 0, false).accepted == 1);
  settle(p, 3);
  REQUIRE(!p.a.ev.messages.empty());
  CHECK(p.a.ev.messages.back().token == 99);
}

TEST_CASE("rebuild: the acceptor replaces a lane it had not seen break", "[rebuild]") {
  Pair p;
  const std::uint32_t id = p.up();
  for (std::uint64_t tok = 1; tok <= 4; ++tok) REQUIRE(p.a.send(id, tok).accepted == 1);
  p.a_shipped = p.a.t.sent().size();  // all four lost
  p.a.t.set_connect_result(Result<transport::ConnId>::ok(3));
  p.a.t.inject(closed_on(2));  // only the initiator notices
  p.a.pump();
  settle(p);
  REQUIRE(p.b.ev.messages.size() == 4);
  CHECK(read(p.b.counters.lane_breaks) == 1);  // dropped its old connection on the rejoin Hello
  CHECK(read(p.a.counters.retransmits) == 4);
  CHECK(p.b.ev.down.empty());
}

TEST_CASE("rebuild: duplicates are dropped by lane_seq, a gap breaks the lane", "[rebuild]") {
  Side a(100);
  const std::uint32_t id = a.connect_up(16);
  wire::Header h = header(wire::MsgType::Send, 7);
  h.lane_seq = 1;
  a.t.inject_recv(2, h);
  a.t.inject_recv(2, h);  // the same message again
  a.pump();
  CHECK(a.ev.messages.size() == 1);
  CHECK(read(a.counters.duplicates_dropped) == 1);

  a.t.set_connect_result(Result<transport::ConnId>::ok(3));
  h.lane_seq = 3;  // 2 is missing
  a.t.inject_recv(2, h);
  a.pump();
  a.pump();  // the new connection comes up (connect_async): the rejoin Hello goes
  CHECK(a.ev.messages.size() == 1);
  CHECK(read(a.counters.lane_breaks) == 1);
  CHECK(a.ev.down.empty());
  const auto& rejoin = a.t.sent().back();
  CHECK(rejoin.conn == 3);
  CHECK(rejoin.header.ack == 1);  // tells the peer where to start again

  // The peer's rejoin ack; then the missing message and its successor.
  wire::Header ack = header(wire::MsgType::HelloAck, 1);
  ack.flags = wire::kFlagRetransmit;
  a.t.inject_recv(3, ack, handshake(50, 16));
  h.lane_seq = 2;
  a.t.inject_recv(3, h);
  h.lane_seq = 3;
  a.t.inject_recv(3, h);
  a.pump();
  CHECK(a.ev.messages.size() == 3);
  CHECK(read(a.counters.recoveries) == 1);
  CHECK(a.mgr->find(id)->state == ChannelState::Up);
}

TEST_CASE("rebuild: a message left unacknowledged breaks the lane after the retransmission timeout", "[rebuild]") {
  Side a(100);  // peer_timeout_ms 100 s: the timeout is twice that
  const std::uint32_t id = a.connect_up(16);
  REQUIRE(a.mgr->send(*a.mgr->find(id), 0, header(wire::MsgType::Send, 5), nullptr, 0, 5, true).accepted == 1);
  a.t.set_connect_result(Result<transport::ConnId>::ok(3));
  // The peer stays alive (anything heard counts); only the message is late.
  const std::uint64_t sent = a.now;
  auto hear_at = [&a](std::uint64_t at) {
    a.t.inject_recv(1, header(wire::MsgType::Heartbeat, 1));
    a.now = at;
    a.pump();
    a.mgr->tick(a.now);
  };
  hear_at(sent + 90'000 * kMs);
  hear_at(sent + 180'000 * kMs);
  CHECK(read(a.counters.lane_breaks) == 0);
  CHECK(a.ev.down.empty());
  hear_at(sent + 201'000 * kMs);
  CHECK(read(a.counters.lane_breaks) == 1);
  CHECK(a.ev.down.empty());
  CHECK(a.ev.done.empty());  // kept for the rebuilt lane, not failed
}

TEST_CASE("rebuild: a lost bootstrap connection still fails the channel and every kept WR once", "[rebuild]") {
  Side a(100);
  const std::uint32_t id = a.connect_up(16);
  REQUIRE(a.mgr->send(*a.mgr->find(id), 0, header(wire::MsgType::Send, 5), nullptr, 0, 5, true).accepted == 1);
  a.t.inject(closed_on(1));
  a.pump();
  REQUIRE(a.ev.down.size() == 1);
  REQUIRE(a.ev.done.size() == 1);
  CHECK(a.ev.done[0] == std::make_pair(std::uint64_t{5}, Status::PeerReset));
  a.mgr->tick(a.now + 1000 * kMs);
  CHECK(a.ev.done.size() == 1);
}
