// Lane on its own (no ChannelManager, no daemon): a recording transport
// shows every WR it posts. Credits never go below zero and no SEND goes
// without one; acks retire the ring in order; a rebuild posts again exactly
// what the peer did not acknowledge, with its old lane_seq numbers.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <vector>

#include "daemon/peer/lane.h"
#include "transport/testing/recording_transport.h"

namespace {

using namespace ferry;
using daemon::peer::Flush;
using daemon::peer::Lane;
using daemon::peer::RxOrder;
using transport::testing::RecordingTransport;

struct Done final : daemon::peer::LaneCompletions {
  std::vector<std::pair<std::uint64_t, Status>> done;
  void on_send_done(std::uint64_t user_data, Status status) override { done.emplace_back(user_data, status); }
  std::vector<std::uint64_t> ids() const {
    std::vector<std::uint64_t> out;
    for (const auto& d : done) out.push_back(d.first);
    return out;
  }
};

struct Rig {
  RecordingTransport t;
  Done done;
  daemon::Counters counters;
  Lane lane;
  // A joined lane on connection `conn` whose peer posted `peer_credits` receives.
  explicit Rig(std::uint32_t peer_credits, transport::ConnId conn = 7) {
    lane.attach(t, done, counters);
    lane.open();
    lane.set_conn(conn);
    lane.join();
    lane.credits_from(peer_credits, false);  // our Hello used one of them
  }
  transport::PostResult send(std::uint64_t user_data, bool signaled = true) {
    transport::SendWr wr;
    wr.header.type = wire::MsgType::Send;
    wr.user_data = user_data;
    wr.signaled = signaled;
    return lane.post(wr, 1);
  }
  std::size_t sends_on(transport::ConnId c) const {
    return static_cast<std::size_t>(std::count_if(t.sent().begin(), t.sent().end(), [&](const auto& s) {
      return s.conn == c && s.header.type == wire::MsgType::Send;
    }));
  }
};

}  // namespace

TEST_CASE("lane: a SEND is posted only with a credit, the reserve stays for Credit messages") {
  Rig r(5);  // 4 usable after the Hello; one of them is the reserve
  for (std::uint64_t i = 1; i <= 10; ++i) {
    const auto p = r.send(i);
    REQUIRE(p.accepted == 1);                                // accepted: posted or queued, never lost
    CHECK(r.lane.stats().credits <= r.lane.peer_credits());  // never wrapped below zero
  }
  CHECK(r.sends_on(7) == 3);
  CHECK(r.lane.stats().credits == Lane::kCreditReserve);
  CHECK(r.lane.stats().backlog == 7);
  CHECK(r.lane.stats().credit_stalls == 7);
  // A flush without a grant posts nothing more.
  CHECK(r.lane.flush(2) == Flush::Done);
  CHECK(r.sends_on(7) == 3);
  // The peer returns 2 receives: exactly 2 more go, in order.
  REQUIRE(r.lane.on_received(true, 2));
  CHECK(r.lane.flush(2) == Flush::Done);
  REQUIRE(r.sends_on(7) == 5);
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(r.t.sent()[i].user_data == i + 1);
    CHECK(r.t.sent()[i].header.lane_seq == i + 1);
  }
  CHECK(r.lane.stats().credits == Lane::kCreditReserve);
  // A grant larger than what the peer could owe us is refused.
  CHECK_FALSE(r.lane.on_received(false, 50));
  // The reserve credit carries a Credit message, and then no more goes.
  REQUIRE(r.lane.reposted());
  CHECK(r.lane.post_credit());
  CHECK(r.lane.stats().credits == 0);
  CHECK_FALSE(r.lane.post_credit());
  CHECK(r.lane.flush(3) == Flush::Done);
  CHECK(r.sends_on(7) == 5);
}

TEST_CASE("lane: the transport's refusal keeps the WR queued and in order") {
  Rig r(64);
  r.t.limit_accepts(1);
  REQUIRE(r.send(1).accepted == 1);
  REQUIRE(r.send(2).accepted == 1);  // refused by the transport (Busy): queued
  REQUIRE(r.send(3).accepted == 1);
  CHECK(r.sends_on(7) == 1);
  CHECK(r.lane.flush(2) == Flush::Busy);
  r.t.limit_accepts(100);
  CHECK(r.lane.flush(2) == Flush::Done);
  REQUIRE(r.sends_on(7) == 3);
  CHECK(r.t.sent()[1].user_data == 2);
  CHECK(r.t.sent()[2].user_data == 3);
  r.t.limit_accepts(0, Status::EndpointClosed);
  REQUIRE(r.send(4).accepted == 1);
  CHECK(r.lane.flush(2) == Flush::Refused);  // the caller breaks the lane; WR 4 stays
  CHECK(r.lane.stats().backlog == 1);
}

TEST_CASE("lane: acks retire the ring in order, SendDone alone does not") {
  Rig r(64);
  for (std::uint64_t i = 1; i <= 5; ++i) REQUIRE(r.send(i).accepted == 1);
  REQUIRE(r.sends_on(7) == 5);
  // The transport finished them all, the peer has confirmed none: nothing reported.
  r.lane.send_done(5);
  CHECK(r.done.done.empty());
  CHECK(r.lane.stats().unconfirmed == 5);
  REQUIRE(r.lane.take_ack(3));
  CHECK(r.done.ids() == std::vector<std::uint64_t>{1, 2, 3});
  CHECK(r.lane.stats().unconfirmed == 2);
  REQUIRE(r.lane.take_ack(3));  // the same ack again: nothing new
  CHECK(r.done.done.size() == 3);
  CHECK_FALSE(r.lane.take_ack(9));  // acks what we never sent
  CHECK_FALSE(r.lane.take_ack(2));  // goes backwards
  REQUIRE(r.lane.take_ack(5));
  CHECK(r.done.ids() == std::vector<std::uint64_t>{1, 2, 3, 4, 5});
  for (const auto& d : r.done.done) CHECK(d.second == Status::Ok);
  CHECK(r.lane.settled());
}

TEST_CASE("lane: a signaled WR the peer acked waits for its SendDone") {
  Rig r(64);
  REQUIRE(r.send(1).accepted == 1);
  REQUIRE(r.send(2).accepted == 1);
  REQUIRE(r.lane.take_ack(2));
  CHECK(r.done.done.empty());  // the NIC may still read what they name
  r.lane.send_done(1);
  CHECK(r.done.ids() == std::vector<std::uint64_t>{1});
  r.lane.send_done(2);
  CHECK(r.done.ids() == std::vector<std::uint64_t>{1, 2});
}

TEST_CASE("lane: a rebuild replays exactly the unacknowledged WRs, with their numbers") {
  Rig r(64);
  for (std::uint64_t i = 1; i <= 6; ++i) REQUIRE(r.send(i).accepted == 1);
  for (std::uint64_t i = 1; i <= 6; ++i) r.lane.send_done(i);
  REQUIRE(r.lane.take_ack(2));  // 1, 2 confirmed
  CHECK(r.done.ids() == std::vector<std::uint64_t>{1, 2});
  // The connection dies; a WR posted meanwhile queues behind the kept ones.
  r.lane.break_conn(10, 20);
  CHECK(r.lane.broken());
  CHECK(r.lane.stats().credits == 0);
  REQUIRE(r.send(7).accepted == 1);
  CHECK(r.sends_on(7) == 6);  // nothing went on the dead connection
  // A new connection; the peer had got up to lane_seq 4 (3 and 4 arrived, their ack did not).
  r.lane.rejoin(8);
  r.lane.credits_from(64, false);
  REQUIRE(r.lane.replay(4));
  CHECK(r.done.ids() == std::vector<std::uint64_t>{1, 2, 3, 4});
  CHECK(r.lane.flush(30) == Flush::Done);
  std::vector<std::pair<std::uint64_t, std::uint32_t>> again;
  for (const auto& s : r.t.sent()) {
    if (s.conn == 8) again.emplace_back(s.user_data, s.header.lane_seq);
  }
  const std::vector<std::pair<std::uint64_t, std::uint32_t>> want{{5, 5}, {6, 6}, {7, 7}};
  CHECK(again == want);
  CHECK(r.lane.stats().retransmits == 2);
  CHECK(r.lane.stats().rebuilds == 1);
  // A peer that claims more than we sent is refused.
  r.lane.break_conn(40, 50);
  r.lane.rejoin(9);
  CHECK_FALSE(r.lane.replay(99));
}

TEST_CASE("lane: the receive side accepts in order, drops duplicates, sees gaps") {
  Rig r(8);
  CHECK(r.lane.accept_seq(1) == RxOrder::Next);
  CHECK(r.lane.accept_seq(2) == RxOrder::Next);
  CHECK(r.lane.accept_seq(2) == RxOrder::Duplicate);
  CHECK(r.lane.accept_seq(1) == RxOrder::Duplicate);
  CHECK(r.lane.accept_seq(4) == RxOrder::Gap);
  CHECK(r.lane.rx_seq() == 2);
  // Our next SEND carries the ack.
  REQUIRE(r.send(1).accepted == 1);
  CHECK(r.t.sent().back().header.ack == 2);
}

TEST_CASE("lane: close fails every kept and queued WR once, with PeerReset") {
  Rig r(3);  // 2 usable: one SEND goes, the rest wait
  REQUIRE(r.send(1).accepted == 1);
  REQUIRE(r.send(2).accepted == 1);
  REQUIRE(r.send(3).accepted == 1);
  REQUIRE(r.sends_on(7) == 1);
  r.lane.close();
  CHECK(r.done.ids() == std::vector<std::uint64_t>{1, 2, 3});
  for (const auto& d : r.done.done) CHECK(d.second == Status::PeerReset);
  CHECK_FALSE(r.lane.is_open());
  r.lane.close();
  CHECK(r.done.done.size() == 3);
  CHECK(r.send(4).status == Status::Busy);  // no ring: nothing taken
}

namespace {
long resident_kib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}
}  // namespace

TEST_CASE("lane: one message at a time keeps to the front of its ring") {
  // An empty ring starts again at slot 0, so a lane that never has more than
  // a message or two outstanding (an idle peer's heartbeat-paced traffic)
  // touches a page of its ring, not all of it: 32 lanes x 2,048 messages
  // each. Walking the whole ring would commit 32 x ~170 KiB.
  constexpr int kLanes = 32;
  constexpr std::uint64_t kMessages = 2048;
  std::vector<std::unique_ptr<Rig>> rigs;
  for (int i = 0; i < kLanes; ++i) rigs.push_back(std::make_unique<Rig>(8));
  auto exchange = [&](Rig& r, std::uint64_t id) {
    REQUIRE(r.send(id).accepted == 1);
    r.lane.send_done(id);
    REQUIRE(r.lane.take_ack(r.lane.tx_seq()));
    REQUIRE(r.lane.on_received(false, 1));  // the peer's answer returns the credit
    CHECK(r.lane.settled());
  };
  for (auto& r : rigs) {  // the recorders' vectors reach their size first
    for (std::uint64_t i = 1; i <= 64; ++i) exchange(*r, i);
    r->t.clear_sent();
    r->done.done.clear();
  }
  const long before = resident_kib();
  for (std::uint64_t i = 65; i <= kMessages; ++i) {
    for (auto& r : rigs) {
      exchange(*r, i);
      if (i % 64 == 0) {
        r->t.clear_sent();
        r->done.done.clear();
      }
    }
  }
  const long grown = resident_kib() - before;
  CAPTURE(grown, sizeof(Lane));
  CHECK(grown < 1024);  // walking the rings: ~5,400 KiB
}
