// Resource exhaustion at attach time: with --max-clients 2 a third client is
// refused Busy (a clear status, nothing half-made), the daemon and the two
// attached clients keep working (a call between them), and once one of them
// leaves its place can be taken again. An arena request past the daemon's
// limit (max-tx-arena-bytes) is refused NoMemory the same way.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "tests/integration/harness.h"

using namespace ferry;
using namespace ferry::itest;

TEST_CASE("past max-clients an attach is refused Busy; the others keep working; a freed place is taken again") {
  Daemon d({"--max-clients", "2"});
  auto a = attach_retry(d.socket(), "res-a");
  REQUIRE(a != nullptr);
  AttachOptions o;
  o.socket_path = d.socket();
  o.name = "res-b";
  auto b = Client::attach(o);
  REQUIRE(b);
  o.name = "res-c";
  auto c = Client::attach(o);
  REQUIRE(!c);
  CHECK(c.status == Status::Busy);
  CHECK(d.alive());
  CHECK(d.clients() == 2);

  // The two attached ones still work: b calls a service a serves.
  REQUIRE(a->serve("res-echo"));
  auto ep = open_retry(*b.value, "res-echo");
  REQUIRE(ep);
  Buffer req = b.value->alloc(64);
  Buffer resp = b.value->alloc(64);
  REQUIRE(req);
  REQUIRE(resp);
  std::memset(req.data, 0x5A, 64);
  REQUIRE(b.value->call(ep.value, req, 64, resp, 7) == Status::Ok);
  std::vector<Completion> got(16);
  bool replied = false, answered = false;
  const auto deadline = Clock::now() + 10s;
  while (!(replied && answered) && Clock::now() < deadline) {
    for (std::size_t i = 0, n = a->wait(got, 20ms); i < n; ++i) {
      if (got[i].kind != Completion::Kind::Request) continue;
      Buffer r = a->alloc(got[i].length);
      REQUIRE(r);
      std::memcpy(r.data, got[i].data, got[i].length);
      REQUIRE(a->reply(got[i].token, r, got[i].length, 8) == Status::Ok);
      a->release(got[i]);
      replied = true;
    }
    for (std::size_t i = 0, n = b.value->poll(got); i < n; ++i) {
      if (got[i].kind == Completion::Kind::OpDone && got[i].op == OpKind::Call && got[i].user_data == 7) {
        CHECK(got[i].status == Status::Ok);
        CHECK(got[i].length == 64);
        answered = true;
      }
    }
  }
  CHECK(replied);
  CHECK(answered);

  // One leaves: its place can be taken again.
  a.reset();
  REQUIRE(d.wait_clients(1, 5s));
  auto c2 = Client::attach(o);
  REQUIRE(c2);
  CHECK(d.clients() == 2);

  // An arena past the daemon's limit: refused, nothing attached.
  b = Result<std::unique_ptr<Client>>::fail(Status::Busy);  // detaches b
  REQUIRE(d.wait_clients(1, 5s));
  AttachOptions big = o;
  big.name = "res-big";
  big.tx_bytes = std::uint64_t{4} << 30;
  auto huge = Client::attach(big);
  REQUIRE(!huge);
  CHECK(huge.status == Status::NoMemory);  // more than max-tx-arena-bytes: the quota
  CHECK(d.alive());
  CHECK(d.clients() == 1);
}
