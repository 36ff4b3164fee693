// The per-channel table of a peer's arena keys (daemon/peer/peer_keys.h)
// and the lane that picks, at every post, the key of the peer rail its
// connection reaches (Lane::set_peer_rail), replays included.
#include <catch2/catch.hpp>

#include "daemon/peer/lane.h"
#include "daemon/peer/peer_keys.h"
#include "transport/testing/recording_transport.h"

namespace {

using namespace ferry;
using daemon::peer::Lane;
using daemon::peer::PeerKeyTable;
using transport::testing::RecordingTransport;

wire::RailKeys arena(std::uint64_t addr, std::uint64_t length, std::uint32_t rails, std::uint32_t key0) {
  wire::RailKeys rk;
  rk.addr = addr;
  rk.length = length;
  rk.rails = rails;
  for (std::uint32_t i = 0; i < rails; ++i) rk.rkey[i] = key0 + i;
  return rk;
}

wire::RemoteBuffer buf(std::uint64_t addr, std::uint32_t length, std::uint32_t rkey = 0x55) {
  return wire::RemoteBuffer{addr, rkey, length};
}

struct Done final : daemon::peer::LaneCompletions {
  void on_send_done(std::uint64_t, Status) override {}
};

}  // namespace

TEST_CASE("peer keys: a buffer inside an arena gets that arena's keys, rail by rail") {
  PeerKeyTable t;
  CHECK(t.learn(1, arena(0x10000, 0x10000, 2, 0xA0)) == 0);
  CHECK(t.learn(1, arena(0x40000, 0x1000, 2, 0xB0)) == 0);
  std::array<std::uint32_t, transport::kMaxRails> k{};
  REQUIRE(t.fill(1, buf(0x10000, 0x10000), k));  // the whole arena
  CHECK(k == std::array<std::uint32_t, transport::kMaxRails>{0xA0, 0xA1, 0, 0});
  REQUIRE(t.fill(1, buf(0x40800, 0x800), k));  // its last bytes
  CHECK(k[0] == 0xB0);
  CHECK(k[1] == 0xB1);
  SECTION("nothing that is not wholly inside one arena") {
    k = {7, 7, 7, 7};
    CHECK_FALSE(t.fill(1, buf(0x1F000, 0x2000), k));                          // runs past the end
    CHECK_FALSE(t.fill(1, buf(0x0F000, 0x2000), k));                          // starts before
    CHECK_FALSE(t.fill(1, buf(0x30000, 0x10), k));                            // between arenas
    CHECK(k == std::array<std::uint32_t, transport::kMaxRails>{7, 7, 7, 7});  // left alone
    CHECK(t.find(1, 0x40000, 0) == nullptr);
    CHECK(t.find(1, 0xFFFF'FFFF'FFFF'FFF0ull, 0x20) == nullptr);  // wraps
  }
  SECTION("tables are per channel, and go with it") {
    CHECK_FALSE(t.fill(2, buf(0x10000, 0x100), k));
    CHECK(t.size(1) == 2);
    t.forget(1);
    CHECK(t.size(1) == 0);
    CHECK(t.channels() == 0);
    CHECK_FALSE(t.fill(1, buf(0x10000, 0x100), k));
  }
}

TEST_CASE("peer keys: an overlapping announcement replaces what it overlaps") {
  PeerKeyTable t;
  (void)t.learn(1, arena(0x10000, 0x10000, 2, 0xA0));
  (void)t.learn(1, arena(0x30000, 0x10000, 2, 0xC0));
  // A new arena where part of both old ones were (they are gone: the peer's
  // arenas never overlap at one time).
  CHECK(t.learn(1, arena(0x18000, 0x20000, 2, 0xD0)) == 2);
  CHECK(t.size(1) == 1);
  std::array<std::uint32_t, transport::kMaxRails> k{};
  REQUIRE(t.fill(1, buf(0x18000, 0x100), k));
  CHECK(k[0] == 0xD0);
  CHECK_FALSE(t.fill(1, buf(0x10000, 0x100), k));  // the old range's keys are gone
  // The same arena again (announced on another lane) replaces itself.
  CHECK(t.learn(1, arena(0x18000, 0x20000, 2, 0xD0)) == 1);
  CHECK(t.size(1) == 1);
}

TEST_CASE("peer keys: the table is bounded; past it the least recently used goes") {
  PeerKeyTable t;
  for (std::uint32_t i = 0; i < PeerKeyTable::kMaxEntries + 40; ++i) {
    (void)t.learn(1, arena(0x100000ull * (i + 1), 0x1000, 1, 0x1000 + i));
    CHECK(t.size(1) <= PeerKeyTable::kMaxEntries);
  }
  CHECK(t.size(1) == PeerKeyTable::kMaxEntries);
  std::array<std::uint32_t, transport::kMaxRails> k{};
  CHECK_FALSE(t.fill(1, buf(0x100000, 0x10), k));  // the first ones went
  REQUIRE(t.fill(1, buf(0x100000ull * (PeerKeyTable::kMaxEntries + 40), 0x10), k));
  // Use keeps an entry: touch the oldest left, add one more, it stays.
  const std::uint64_t oldest = 0x100000ull * 41;
  REQUIRE(t.fill(1, buf(oldest, 0x10), k));
  (void)t.learn(1, arena(0x7000'0000, 0x1000, 1, 0x9999));
  CHECK(t.fill(1, buf(oldest, 0x10), k));
  CHECK_FALSE(t.fill(1, buf(0x100000ull * 42, 0x10), k));
}

TEST_CASE("peer keys: fewer rails than the maximum leave the others 0 (the request's key)") {
  PeerKeyTable t;
  (void)t.learn(3, arena(0x1000, 0x1000, 1, 0xE0));
  std::array<std::uint32_t, transport::kMaxRails> k{9, 9, 9, 9};
  REQUIRE(t.fill(3, buf(0x1000, 0x10), k));
  CHECK(k == std::array<std::uint32_t, transport::kMaxRails>{0xE0, 0, 0, 0});
}

TEST_CASE("lane: an RDMA READ takes the key of the peer rail its connection reaches, again at a replay") {
  RecordingTransport rt;
  Done done;
  daemon::Counters counters;
  Lane lane;
  lane.attach(rt, done, counters);
  lane.open();
  lane.set_conn(7);
  lane.join();
  lane.credits_from(64, false);
  lane.set_peer_rail(1);
  transport::SendWr read;
  read.op = transport::WrOp::RdmaRead;
  read.remote = buf(0x10000, 0x1000, 0x55);  // the key the request carried (the peer's rail 0)
  read.remote_rail_rkey = {0xA0, 0xA1, 0, 0};
  read.user_data = 1;
  REQUIRE(lane.post(read, 1).accepted == 1);
  REQUIRE(rt.sent().size() == 1);
  CHECK(rt.sent()[0].remote.rkey == 0xA1);
  CHECK(counters.rail_keys_used.load() == 1);  // 0x55 became 0xA1
  SECTION("a WR without table keys keeps the request's key") {
    transport::SendWr plain = read;
    plain.remote_rail_rkey = {};
    plain.user_data = 2;
    REQUIRE(lane.post(plain, 1).accepted == 1);
    CHECK(rt.sent().back().remote.rkey == 0x55);
  }
  SECTION("unknown peer rail: the request's key") {
    lane.set_peer_rail(Lane::kNoPeerRail);
    transport::SendWr again = read;
    again.user_data = 3;
    REQUIRE(lane.post(again, 1).accepted == 1);
    CHECK(rt.sent().back().remote.rkey == 0x55);
  }
  SECTION("the lane moves to a connection that reaches the peer's rail 0: the replay uses its key") {
    lane.break_conn(10, 20);
    lane.rejoin(8);
    CHECK(lane.peer_rail() == Lane::kNoPeerRail);  // a new connection: told again
    lane.set_peer_rail(0);
    lane.credits_from(64, false);
    REQUIRE(lane.replay(0));
    (void)lane.flush(30);
    REQUIRE(rt.sent().size() == 2);
    CHECK(rt.sent()[1].conn == 8);
    CHECK(rt.sent()[1].remote.rkey == 0xA0);
  }
}
