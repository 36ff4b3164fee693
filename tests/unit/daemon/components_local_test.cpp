// Dispatcher, Parking and Calls of one engine's datapath, driven directly
// (datapath_rig.h): each submitted op completes exactly once, whatever the
// receiver's room, a close, a timeout or a client that goes away.
#include <catch2/catch.hpp>

#include "tests/unit/daemon/datapath_rig.h"

using namespace ferry;
using namespace ferry::daemon;
using namespace ferry::daemon::testing;

namespace {

Status status_of(const shm::CqEntry& e) { return static_cast<Status>(e.status); }

}  // namespace

TEST_CASE("dispatcher: a bad entry completes BadRequest once and changes nothing", "[components]") {
  Rig rig(100);
  TestClient& c = rig.attach();
  shm::SqEntry bad = entry(shm::Op::Send, 7);
  bad.handle = 1;
  bad.offset = c.put("x");
  bad.length = 1;
  bad.reserved2 = 1;  // a reserved field set
  rig.submit(c, bad);
  shm::SqEntry unknown = entry(shm::Op::Nop, 8);
  unknown.op = 200;
  rig.submit(c, unknown);
  const auto d7 = c.done(7);
  const auto d8 = c.done(8);
  REQUIRE(d7.size() == 1);
  REQUIRE(d8.size() == 1);
  CHECK(status_of(d7[0]) == Status::BadRequest);
  CHECK(status_of(d8[0]) == Status::BadRequest);
  CHECK(read(rig.counters.bad_requests) == 2);
  CHECK(c.drain().size() == 2);  // nothing else was posted
}

TEST_CASE("dispatcher: a local Send is one Message and one OpDone; a quiet release frees its block", "[components]") {
  Rig rig(100);
  TestClient& server = rig.attach();
  TestClient& client = rig.attach();
  rig.serve(server, "svc");
  const std::uint32_t ep = rig.open(client, "svc");
  rig.send(client, ep, "hello", 10);
  const auto done = client.done(10);
  REQUIRE(done.size() == 1);
  CHECK(status_of(done[0]) == Status::Ok);
  const auto msgs = server.deliveries(shm::CqKind::Message);
  REQUIRE(msgs.size() == 1);
  CHECK(server.text(msgs[0].offset, msgs[0].length) == "hello");
  CHECK(server.session->rx.live_capacity(msgs[0].offset) != 0);
  rig.release(server, msgs[0]);
  CHECK(server.session->rx.live_capacity(msgs[0].offset) == 0);
  CHECK(server.done(0).empty());  // quiet: no OpDone for it
  // A second release of the same block is refused, once, loudly.
  rig.release(server, msgs[0]);
  const auto again = server.done(0);
  REQUIRE(again.size() == 1);
  CHECK(status_of(again[0]) == Status::BadRequest);
}

TEST_CASE("parking: a Send waits for room, goes when the server releases, and a close cancels the rest",
          "[components]") {
  Rig rig(100);
  TestClient& server = rig.attach(1u << 20);  // one 1 MiB slab of rx arena
  TestClient& client = rig.attach();
  rig.serve(server, "svc");
  const std::uint32_t ep = rig.open(client, "svc");
  const std::string big(600 * 1024, 'b');  // one fills the arena
  rig.send(client, ep, big, 1);
  rig.send(client, ep, big, 2);      // no room: parked
  rig.send(client, ep, "small", 3);  // behind it, in order
  CHECK(client.done(1).size() == 1);
  CHECK(client.done(2).empty());
  CHECK(client.done(3).empty());
  CHECK(read(rig.counters.parked) >= 1);
  const auto first = server.deliveries(shm::CqKind::Message);
  REQUIRE(first.size() == 1);
  rig.release(server, first[0]);
  rig.turn();  // the parked Sends are offered again
  REQUIRE(client.done(2).size() == 1);
  CHECK(status_of(client.done(2)[0]) == Status::Ok);
  // 'small' waits again behind the second big one until that is released.
  auto msgs = server.deliveries(shm::CqKind::Message);
  REQUIRE(msgs.size() == 2);
  CHECK(client.done(3).empty());
  rig.send(client, ep, "later", 4);
  shm::SqEntry close = entry(shm::Op::Close, 5);
  close.handle = ep;
  rig.submit(client, close);
  // Everything still waiting completes Cancelled, each once; then the Close.
  REQUIRE(client.done(3).size() == 1);
  REQUIRE(client.done(4).size() == 1);
  CHECK(status_of(client.done(3)[0]) == Status::Cancelled);
  CHECK(status_of(client.done(4)[0]) == Status::Cancelled);
  REQUIRE(client.done(5).size() == 1);
  CHECK(status_of(client.done(5)[0]) == Status::Ok);
}

TEST_CASE("parking: a Send that waits past the delivery timeout completes Timeout", "[components]") {
  Config cfg;
  cfg.delivery_timeout_ms = 50;
  Rig rig(100, cfg);
  TestClient& server = rig.attach(1u << 20);
  TestClient& client = rig.attach();
  rig.serve(server, "svc");
  const std::uint32_t ep = rig.open(client, "svc");
  const std::string big(600 * 1024, 'b');
  rig.send(client, ep, big, 1);
  rig.send(client, ep, big, 2);
  CHECK(client.done(2).empty());
  rig.now += 60 * kMs;
  rig.turn();
  rig.now += 10 * kMs;  // the deadline sweep's granularity
  rig.turn();
  const auto d = client.done(2);
  REQUIRE(d.size() == 1);
  CHECK(status_of(d[0]) == Status::Timeout);
}

TEST_CASE("calls: the reply lands in the caller's buffer; each side hears once", "[components]") {
  Rig rig(100);
  TestClient& server = rig.attach();
  TestClient& client = rig.attach();
  rig.serve(server, "svc");
  const std::uint32_t ep = rig.open(client, "svc");
  const std::uint64_t resp = rig.call(client, ep, "ping", 64, 20);
  const auto reqs = server.deliveries(shm::CqKind::Request);
  REQUIRE(reqs.size() == 1);
  CHECK(server.text(reqs[0].offset, reqs[0].length) == "ping");
  CHECK(client.done(20).empty());
  rig.reply(server, reqs[0].token, "pong!", 21);
  const auto d = client.done(20);
  REQUIRE(d.size() == 1);
  CHECK(status_of(d[0]) == Status::Ok);
  CHECK(d[0].length == 5);
  CHECK(client.text(resp, 5) == "pong!");
  REQUIRE(server.done(21).size() == 1);
  CHECK(status_of(server.done(21)[0]) == Status::Ok);
  // The token is spent: a second reply is refused.
  rig.reply(server, reqs[0].token, "again", 22);
  REQUIRE(server.done(22).size() == 1);
  CHECK(status_of(server.done(22)[0]) == Status::BadRequest);
  CHECK(client.done(20).size() == 1);
}

TEST_CASE("calls: a server that detaches fails every open call ServiceGone, once each", "[components]") {
  Rig rig(100);
  TestClient& server = rig.attach();
  TestClient& client = rig.attach();
  rig.serve(server, "svc");
  const std::uint32_t ep = rig.open(client, "svc");
  for (std::uint64_t i = 0; i < 5; ++i) (void)rig.call(client, ep, "q", 64, 30 + i);
  REQUIRE(server.deliveries(shm::CqKind::Request).size() == 5);
  rig.detach(server);
  for (std::uint64_t i = 0; i < 5; ++i) {
    const auto d = client.done(30 + i);
    REQUIRE(d.size() == 1);
    CHECK(status_of(d[0]) == Status::ServiceGone);
  }
  // And a new call on the endpoint: the service is gone.
  (void)rig.call(client, ep, "q", 64, 40);
  REQUIRE(client.done(40).size() == 1);
  CHECK(status_of(client.done(40)[0]) == Status::ServiceGone);
}

TEST_CASE("calls: a caller that detaches leaves the server's late Reply CallerGone", "[components]") {
  Rig rig(100);
  TestClient& server = rig.attach();
  TestClient& client = rig.attach();
  rig.serve(server, "svc");
  const std::uint32_t ep = rig.open(client, "svc");
  (void)rig.call(client, ep, "q", 64, 50);
  const auto reqs = server.deliveries(shm::CqKind::Request);
  REQUIRE(reqs.size() == 1);
  rig.detach(client);
  rig.reply(server, reqs[0].token, "late", 51);
  REQUIRE(server.done(51).size() == 1);
  CHECK(status_of(server.done(51)[0]) == Status::CallerGone);
}

TEST_CASE("calls: past its timeout a call completes Timeout and the late Reply CallerGone", "[components]") {
  Rig rig(100);
  TestClient& server = rig.attach();
  TestClient& client = rig.attach();
  rig.serve(server, "svc");
  const std::uint32_t ep = rig.open(client, "svc");
  (void)rig.call(client, ep, "q", 64, 60, 20);  // 20 ms
  const auto reqs = server.deliveries(shm::CqKind::Request);
  REQUIRE(reqs.size() == 1);
  rig.now += 30 * kMs;
  rig.turn();
  const auto d = client.done(60);
  REQUIRE(d.size() == 1);
  CHECK(status_of(d[0]) == Status::Timeout);
  rig.reply(server, reqs[0].token, "late", 61);
  REQUIRE(server.done(61).size() == 1);
  CHECK(status_of(server.done(61)[0]) == Status::CallerGone);
  CHECK(client.done(60).size() == 1);
}
