// A C++ ps::Worker across a restart of its own ferryd (an upgrade's
// `systemctl restart ferryd`), over a real ferryd: with
// WorkerOptions::relink it attaches again at its next operation once
// ferryd and the shard are back, reads what the shard kept, keeps the rows
// it pulled before readable and pushes their gradient; the operation in
// flight fails DaemonGone, the ones while ferryd is away are refused at
// once, and a worker without relink stays DaemonGone.
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "ferry/client.h"
#include "ferry/ps/shard_link.h"
#include "ferry/ps/worker.h"
#include "tests/integration/harness.h"
#include "tests/ps/made.h"
#include "tests/ps/served.h"

using namespace ferry;
using namespace ferry::ps;
using namespace ferry::ps::test;
using namespace ferry::itest;

namespace {

TableSpec table() {
  TableSpec t;
  t.id = 0;
  t.name = "t0";
  t.dim = 2;
  t.rows = 100;
  return t;
}

const ShardSpec kSpec{0, 1, {table()}, 64};

// A worker on `socket`'s ferryd that attaches again when it goes away (or not).
std::unique_ptr<Worker> worker_on(const std::string& socket, bool relink) {
  WorkerOptions wo;
  wo.timeout = 5s;
  return ferry_worker(socket, kSpec.tables, relink, wo);
}

// Row i of a completed pull, as it reads now.
std::vector<float> row_of(const Worker& w, Ticket t, std::size_t i) {
  const PulledRows r = w.rows(t);
  REQUIRE(i < r.index.size());
  const auto at = static_cast<std::ptrdiff_t>(2 * r.index[i]);
  return {r.rows.begin() + at, r.rows.begin() + at + 2};
}

// Pulls `keys` until it works or `within` passed (a refused start while
// ferryd or the shard is not back); the ticket, unreleased.
Ticket pull_until_ok(Worker& w, const std::vector<Key>& keys, std::chrono::milliseconds within) {
  const auto deadline = Clock::now() + within;
  for (;;) {
    const auto p = w.pull(0, keys);
    if (p) {
      REQUIRE(w.wait(p.value, 5s) == Status::Ok);
      return p.value;
    }
    INFO("pull refused: " << to_string(p.status));
    REQUIRE(Clock::now() < deadline);
    std::this_thread::sleep_for(20ms);
  }
}

}  // namespace

TEST_CASE("worker: attaches again after its ferryd restarted and goes on with the same rows") {
  Daemon d;
  Service s(kSpec, d.socket(), 20s);
  const auto w = worker_on(d.socket(), true);
  auto pushed = w->push(0, std::vector<Key>{1}, std::vector<float>{1.0f, 2.0f});
  REQUIRE(pushed);
  REQUIRE(w->wait(pushed.value, 5s) == Status::Ok);
  w->release(pushed.value);
  const Ticket before = pull_until_ok(*w, {1, 2}, 5s);  // kept across the restart
  const std::vector<float> one = row_of(*w, before, 0), two = row_of(*w, before, 1);

  d.restart();
  const auto t0 = Clock::now();
  while (s.service->reattached() == 0 && Clock::now() - t0 < 10s) std::this_thread::sleep_for(10ms);
  REQUIRE(s.service->reattached() == 1);

  const Ticket after = pull_until_ok(*w, {2, 1}, 10s);
  CHECK(w->reattached() == 1);
  CHECK(row_of(*w, after, 0) == two);  // what the shard kept over the restart
  CHECK(row_of(*w, after, 1) == one);
  CHECK(row_of(*w, before, 0) == one);  // the old link's memory, still mapped
  w->release(after);

  // The rows pulled before the restart take their gradient on the new link.
  auto grad = w->push_rows(before, std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f});
  REQUIRE(grad);
  CHECK(w->wait(grad.value, 5s) == Status::Ok);
  w->release(grad.value);
  w->release(before);  // the last operation of the old link: it goes
  const Ticket again = pull_until_ok(*w, {1}, 5s);
  CHECK(row_of(*w, again, 0) != one);  // SGD moved it by the gradient
  w->release(again);
  CHECK(w->live_ops() == 0);
  CHECK(w->reattached() == 1);
}

TEST_CASE("worker: the operation in flight fails DaemonGone, later ones are refused at once until ferryd is back") {
  Daemon d;
  // A shard that never answers: the pull stays in flight until ferryd goes.
  AttachOptions a;
  a.socket_path = d.socket();
  auto stall = Client::attach(a);
  REQUIRE(stall);
  REQUIRE(stall.value->serve("ps-shard-0"));
  const auto w = worker_on(d.socket(), true);
  const auto in_flight = w->pull(0, std::vector<Key>{5});
  REQUIRE(in_flight);
  CHECK(w->wait(in_flight.value, 200ms) == Status::Busy);

  d.kill_hard();
  CHECK(w->wait(in_flight.value, 5s) == Status::DaemonGone);
  w->release(in_flight.value);
  stall.value.reset();
  for (int i = 0; i < 3; ++i) {  // nothing listens: refused at once, tried at most every 100 ms doubling
    const auto t1 = Clock::now();
    const auto refused = w->pull(0, std::vector<Key>{5});
    CHECK(refused.status == Status::DaemonGone);
    CHECK(w->last_refusal().status == Status::DaemonGone);
    CHECK(Clock::now() - t1 < 1s);
  }

  d.restart();                         // ferryd is back, the shard not yet
  std::this_thread::sleep_for(300ms);  // past the retry pause
  const auto refused = w->pull(0, std::vector<Key>{5});
  CHECK(refused.status == Status::ServiceNotFound);
  CHECK(w->reattached() == 0);

  Service s(kSpec, d.socket(), 20s);  // a new shard: the tables' initial values
  const Ticket t = pull_until_ok(*w, {5}, 10s);
  CHECK(w->reattached() == 1);
  w->release(t);
  CHECK(w->live_ops() == 0);
}

TEST_CASE("worker: without relink it stays with its link, DaemonGone") {
  Daemon d;
  Service s(kSpec, d.socket(), 20s);
  const auto w = worker_on(d.socket(), false);
  w->release(pull_until_ok(*w, {1}, 5s));
  d.restart();
  const auto t0 = Clock::now();
  while (s.service->reattached() == 0 && Clock::now() - t0 < 10s) std::this_thread::sleep_for(10ms);
  REQUIRE(s.service->reattached() == 1);
  const auto p = w->pull(0, std::vector<Key>{1});
  const Status st = p ? w->wait(p.value, 5s) : p.status;
  CHECK(st == Status::DaemonGone);
  if (p) w->release(p.value);
  CHECK(w->reattached() == 0);
}
