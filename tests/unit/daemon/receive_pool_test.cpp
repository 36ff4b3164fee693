// The receive pool (daemon/peer/receive_pool.h) on its own and through real
// Lanes: floors always there, borrowing up to the share, the sum of what
// lanes lend never above the receives posted (a model of the shared receive
// queue counts every message in flight and fails on the first that would
// meet an empty queue: an RNR), a lane that stops consuming holding at most
// its share, and an idle lane returning what it borrowed.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "daemon/peer/lane.h"
#include "daemon/peer/receive_pool.h"
#include "transport/testing/recording_transport.h"

namespace {

using namespace ferry;
using daemon::peer::Lane;
using daemon::peer::ReceivePool;
using daemon::peer::ReceivePoolConfig;
using transport::testing::RecordingTransport;

ReceivePoolConfig config(std::uint32_t receives, std::uint32_t connections, std::uint32_t floor, std::uint32_t share) {
  ReceivePoolConfig c;
  c.receives = receives;
  c.connections = connections;
  c.floor = floor;
  c.share = share;
  return c;
}

struct Done final : daemon::peer::LaneCompletions {
  void on_send_done(std::uint64_t, Status) override {}
};

// Lanes of one receiving daemon on a pool, and a model of its shared
// receive queue: `posted` receives, each message a peer sends takes one
// (RNR if none), each poll reposts the previous poll's.
struct Receiver {
  RecordingTransport t;
  Done done;
  daemon::Counters counters;
  ReceivePool pool;
  std::vector<Lane> lanes;
  std::int64_t posted;
  std::vector<std::size_t> arrived;       // messages taken from the queue, completions not yet polled
  std::int64_t returned_last = 0;         // completions the last poll handed out: reposted at the next
  std::vector<std::uint32_t> peer_holds;  // credits each lane's peer holds (grants it has received)
  std::uint64_t now_ns = 1'000'000'000;
  bool rnr = false;

  Receiver(const ReceivePoolConfig& c, std::size_t n) : pool(c), lanes(n), posted(c.receives), peer_holds(n) {
    for (std::size_t i = 0; i < n; ++i) {
      Lane& l = lanes[i];
      l.attach(t, done, counters, &pool);
      l.open();
      l.set_conn(static_cast<transport::ConnId>(i + 1));
      l.join();
      // The peer's HelloAck gave us plenty; we lent it our floor (pooled).
      l.credits_from(1000, false, 1, true);
      peer_holds[i] = c.floor;
    }
  }
  // Lane i's peer sends one data message (it must hold a credit): it takes
  // a posted receive now; the next poll returns its completion.
  void peer_sends(std::size_t i) {
    REQUIRE(peer_holds[i] > 0);
    --peer_holds[i];
    if (posted == 0) rnr = true;
    --posted;
    arrived.push_back(i);
  }
  // One lanes poll, in the daemon's order: the transport reposts what the
  // last poll handed out, the lanes decide grants (each reaches its peer at
  // once), then this poll's completions are handed to the lanes.
  void poll(std::uint64_t dt_ns = 100'000) {
    now_ns += dt_ns;
    posted += returned_last;
    for (std::size_t i = 0; i < lanes.size(); ++i) {
      Lane& l = lanes[i];
      (void)l.reposted(now_ns);
      peer_holds[i] += l.owed();
      l.traffic().credits_owed = 0;  // the grant went (piggybacked or as a Credit)
    }
    returned_last = static_cast<std::int64_t>(arrived.size());
    for (std::size_t i : arrived) REQUIRE(lanes[i].on_received(false, 0));
    arrived.clear();
  }
  std::uint64_t sum_lent() const {
    std::uint64_t s = 0;
    for (const Lane& l : lanes) s += l.lent();
    return s;
  }
  std::uint64_t sum_held() const {
    std::uint64_t s = 0;
    for (std::uint32_t h : peer_holds) s += h;
    return s;
  }
};

}  // namespace

TEST_CASE("receive pool: the configuration must reserve every connection's floor") {
  CHECK(ReceivePool::check(config(64, 16, 4, 32)).ok());
  CHECK(ReceivePool::check(config(63, 16, 4, 32)).failed());  // 16 x 4 > 63
  CHECK(ReceivePool::check(config(64, 16, 1, 32)).failed());  // no room beside the Credit reserve
  CHECK(ReceivePool::check(config(64, 16, 4, 3)).failed());   // share below floor
  CHECK(ReceivePool::check(config(64, 0, 4, 8)).failed());
}

TEST_CASE("receive pool: a lane borrows beyond its floor up to its share, and only what is free") {
  ReceivePool p(config(100, 10, 4, 40));
  CHECK(p.shared() == 60);
  CHECK(p.take(4, 100) == 36);  // capped by the share: lends 40
  CHECK(p.borrowed() == 36);
  CHECK(p.take(4, 100) == 24);  // only 24 left to borrow
  CHECK(p.available() == 0);
  CHECK(p.take(4, 10) == 0);  // nothing free beyond the floor
  // Below the floor the reservation answers, whatever the others borrowed.
  CHECK(p.take(0, 4) == 4);
  CHECK(p.take(1, 10) == 3);
  p.give_back(40, 4);  // the first lane went back to its floor
  CHECK(p.available() == 36);
  p.give_back(28, 0);  // the second lane's connection closed
  CHECK(p.borrowed() == 0);
  p.give_back(3, 0);  // at or below the floor: nothing was borrowed
  CHECK(p.borrowed() == 0);
}

TEST_CASE("receive pool: busy lanes borrow up to their share, the sum lent never exceeds the receives posted") {
  // 8 connections x floor 4 = 32 reserved of 96; 64 shared, share 40: two
  // busy lanes exhaust it, four compete for it.
  Receiver r(config(96, 8, 4, 40), 8);
  std::mt19937 rng(7);
  std::uint32_t max_lent_busy = 0;
  for (int step = 0; step < 4000; ++step) {
    // Lanes 0..3 send as fast as their credits allow, the others rarely.
    for (std::size_t i = 0; i < r.lanes.size(); ++i) {
      const bool busy = i < 4;
      std::uint32_t n = busy ? r.peer_holds[i] : (rng() % 50 == 0 && r.peer_holds[i] > 0 ? 1 : 0);
      if (n > 1) n = 1 + rng() % n;
      for (std::uint32_t k = 0; k < n; ++k) r.peer_sends(i);
    }
    r.poll();
    REQUIRE_FALSE(r.rnr);
    // What peers hold plus what is used and not yet reposted: all lent.
    REQUIRE(r.sum_lent() <= 96);
    REQUIRE(r.sum_held() <= static_cast<std::uint64_t>(r.posted));
    for (std::size_t i = 0; i < r.lanes.size(); ++i) REQUIRE(r.lanes[i].lent() <= 40);
    for (std::size_t i = 0; i < 4; ++i) max_lent_busy = std::max(max_lent_busy, r.lanes[i].lent());
  }
  CHECK(max_lent_busy > 4);  // busy lanes did borrow
  CHECK(r.pool.borrowed() <= r.pool.shared());
}

TEST_CASE("receive pool: a peer that stops consuming holds at most its share; the others keep their floors") {
  Receiver r(config(64, 4, 4, 40), 4);
  // Lane 0's peer is busy until it holds its share, then stops dead.
  for (int step = 0; step < 200; ++step) {
    while (r.peer_holds[0] > 0) r.peer_sends(0);
    r.poll();
    r.poll();
  }
  for (int step = 0; step < 200 && r.peer_holds[0] < 40; ++step) r.poll();
  // Its lane's demand still lends the share: the peer holds it all, unused.
  CHECK(r.lanes[0].lent() <= 40);
  CHECK(r.peer_holds[0] <= 40);
  // The other three still get their floor and borrow only what is left
  // (64 - 16 reserved = 48 shared; lane 0 holds up to 36 of it).
  for (int step = 0; step < 300; ++step) {
    for (std::size_t i = 1; i < 4; ++i) {
      while (r.peer_holds[i] > 0) r.peer_sends(i);
    }
    r.poll();
    REQUIRE_FALSE(r.rnr);
    REQUIRE(r.sum_lent() <= 64);
    for (std::size_t i = 1; i < 4; ++i) REQUIRE(r.lanes[i].lent() >= 1);
  }
  CHECK(r.lanes[0].lent() <= 40);
}

TEST_CASE("receive pool: an idle lane is granted back less than it used, down to its floor") {
  Receiver r(config(200, 4, 4, 64), 2);
  // Busy: the lane grows toward its share.
  for (int step = 0; step < 100; ++step) {
    while (r.peer_holds[0] > 0) r.peer_sends(0);
    r.poll(10'000);
  }
  const std::uint32_t busy = r.lanes[0].lent();
  CHECK(busy > 32);
  const std::uint32_t borrowed_busy = r.pool.borrowed();
  CHECK(borrowed_busy > 0);
  // Then one message every 5 ms: the lane grants less than used until it
  // is near its floor, and the pool gets the difference back.
  std::uint32_t used = 0, granted = 0;
  for (int step = 0; step < 200; ++step) {
    if (r.peer_holds[0] == 0) break;
    r.peer_sends(0);
    ++used;
    const std::uint32_t before = r.peer_holds[0];
    r.poll(5'000'000);
    granted += r.peer_holds[0] - before;
  }
  CHECK(granted < used);
  CHECK(r.lanes[0].lent() <= 4 + 2 * 2);  // floor plus twice the recent use
  CHECK(r.pool.borrowed() < borrowed_busy);
}

TEST_CASE("receive pool: a broken connection gives back all its lane lent") {
  Receiver r(config(100, 4, 4, 50), 1);
  for (int step = 0; step < 50; ++step) {
    while (r.peer_holds[0] > 0) r.peer_sends(0);
    r.poll(10'000);
  }
  CHECK(r.pool.borrowed() > 0);
  r.lanes[0].break_conn(r.now_ns, r.now_ns);
  CHECK(r.lanes[0].lent() == 0);
  CHECK(r.pool.borrowed() == 0);
}

TEST_CASE("receive pool: without a pooled peer a lane grants back only what was used, never above its floor") {
  ReceivePool pool(config(64, 4, 4, 32));
  RecordingTransport t;
  Done done;
  daemon::Counters counters;
  Lane l;
  l.attach(t, done, counters, &pool);
  l.open();
  l.set_conn(3);
  l.join();
  l.credits_from(16, false, 1, false);  // an old peer: no kCapCreditPool
  CHECK(l.lent() == 4);
  for (int k = 0; k < 3; ++k) REQUIRE(l.on_received(false, 0));
  CHECK(l.reposted(1'000'000));
  CHECK(l.owed() == 3);  // back to the floor, not beyond
  CHECK(l.lent() == 4);
  CHECK(pool.borrowed() == 0);
  // And it holds the peer to the strict rule: a grant of receives we never used fails.
  CHECK_FALSE(l.on_received(false, 40));
}
