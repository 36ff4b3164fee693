// RemoteSender, ProxyServer and the replier between two datapaths joined
// by a Wire (datapath_rig.h): remote Open, Send and Call, and exactly one
// completion per op when the channel dies or a side's client goes away.
#include <catch2/catch.hpp>

#include "tests/unit/daemon/datapath_rig.h"

using namespace ferry;
using namespace ferry::daemon;
using namespace ferry::daemon::testing;

namespace {

Status status_of(const shm::CqEntry& e) { return static_cast<Status>(e.status); }

constexpr std::string_view kTarget = "198.18.0.2:7000/svc";

// A's client opens B's "svc": the channel comes up on the way.
std::uint32_t open_remote(Wire& w, TestClient& client, std::uint64_t ud = 901) {
  w.a.wire->set_connect_result(Result<transport::ConnId>::ok(1));  // the bootstrap connection
  w.a.open_async(client, kTarget, ud);
  w.a.wire->set_connect_result(Result<transport::ConnId>::ok(2));  // the lane
  w.run();
  const auto d = client.done(ud);
  REQUIRE(d.size() == 1);
  REQUIRE(status_of(d[0]) == Status::Ok);
  return d[0].handle;
}

}  // namespace

TEST_CASE("remote: Open, Send and Call cross to the peer's service and back", "[components]") {
  Rig a(100), b(200);
  Wire w{a, b};
  TestClient& server = b.attach();
  TestClient& client = a.attach();
  b.serve(server, "svc");
  const std::uint32_t ep = open_remote(w, client);

  a.send(client, ep, "one-way", 1);
  w.run();
  REQUIRE(client.done(1).size() == 1);
  CHECK(status_of(client.done(1)[0]) == Status::Ok);
  const auto msgs = server.deliveries(shm::CqKind::Message);
  REQUIRE(msgs.size() == 1);
  CHECK(server.text(msgs[0].offset, msgs[0].length) == "one-way");

  const std::uint64_t resp = a.call(client, ep, "question", 128, 2);
  w.run();
  const auto reqs = server.deliveries(shm::CqKind::Request);
  REQUIRE(reqs.size() == 1);
  CHECK(server.text(reqs[0].offset, reqs[0].length) == "question");
  b.reply(server, reqs[0].token, "answer", 3);
  w.run();
  const auto d = client.done(2);
  REQUIRE(d.size() == 1);
  CHECK(status_of(d[0]) == Status::Ok);
  CHECK(client.text(resp, d[0].length) == "answer");
  REQUIRE(server.done(3).size() == 1);
  CHECK(status_of(server.done(3)[0]) == Status::Ok);
  CHECK(read(a.counters.remote_calls) == 1);
  CHECK(read(b.counters.remote_delivered) == 2);
}

TEST_CASE("remote: an Open of a service the peer lacks fails ServiceNotFound", "[components]") {
  Rig a(100), b(200);
  Wire w{a, b};
  TestClient& client = a.attach();
  a.wire->set_connect_result(Result<transport::ConnId>::ok(1));
  a.open_async(client, kTarget, 5);
  a.wire->set_connect_result(Result<transport::ConnId>::ok(2));
  w.run();
  const auto d = client.done(5);
  REQUIRE(d.size() == 1);
  CHECK(status_of(d[0]) == Status::ServiceNotFound);
}

TEST_CASE("remote: a channel that dies fails each op in flight once, PeerReset", "[components]") {
  Rig a(100), b(200);
  Wire w{a, b};
  TestClient& server = b.attach();
  TestClient& client = a.attach();
  b.serve(server, "svc");
  const std::uint32_t ep = open_remote(w, client);
  for (std::uint64_t i = 0; i < 4; ++i) (void)a.call(client, ep, "q", 64, 10 + i);
  w.run();
  REQUIRE(server.deliveries(shm::CqKind::Request).size() == 4);
  // A loses the channel (the peer died, as a heartbeat timeout says).
  peer::Channel* ch = a.dp->peers->route(1);
  REQUIRE(ch != nullptr);
  a.dp->peers->fail_channel(*ch, Status::PeerReset, a.now);
  a.turn();
  for (std::uint64_t i = 0; i < 4; ++i) {
    const auto d = client.done(10 + i);
    REQUIRE(d.size() == 1);
    CHECK(status_of(d[0]) == Status::PeerReset);
  }
  // Later ops on the endpoint fail at once; none completes twice.
  a.send(client, ep, "after", 20);
  REQUIRE(client.done(20).size() == 1);
  CHECK(status_of(client.done(20)[0]) == Status::PeerReset);
  for (std::uint64_t i = 0; i < 4; ++i) CHECK(client.done(10 + i).size() == 1);
}

TEST_CASE("remote: a caller that detaches mid-call leaves the server's Reply CallerGone", "[components]") {
  Rig a(100), b(200);
  Wire w{a, b};
  TestClient& server = b.attach();
  TestClient& client = a.attach();
  b.serve(server, "svc");
  const std::uint32_t ep = open_remote(w, client);
  (void)a.call(client, ep, "q", 64, 30);
  w.run();
  const auto reqs = server.deliveries(shm::CqKind::Request);
  REQUIRE(reqs.size() == 1);
  a.detach(client);  // its proxy at B closes
  w.run();
  b.reply(server, reqs[0].token, "late", 31);
  w.run();
  REQUIRE(server.done(31).size() == 1);
  CHECK(status_of(server.done(31)[0]) == Status::CallerGone);
}

TEST_CASE("remote: a server that detaches fails its callers' calls ServiceGone", "[components]") {
  Rig a(100), b(200);
  Wire w{a, b};
  TestClient& server = b.attach();
  TestClient& client = a.attach();
  b.serve(server, "svc");
  const std::uint32_t ep = open_remote(w, client);
  for (std::uint64_t i = 0; i < 3; ++i) (void)a.call(client, ep, "q", 64, 40 + i);
  w.run();
  REQUIRE(server.deliveries(shm::CqKind::Request).size() == 3);
  b.detach(server);
  w.run();
  for (std::uint64_t i = 0; i < 3; ++i) {
    const auto d = client.done(40 + i);
    REQUIRE(d.size() == 1);
    CHECK(status_of(d[0]) == Status::ServiceGone);
  }
}
