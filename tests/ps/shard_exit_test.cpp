// A shard served over a real ferryd, in C++:
// ShardServer::run() ends with DaemonGone soon after its ferryd is killed
// (the library half of "the shard exits when ferryd goes away"; `ferry-ps
// server` and the Python server exit on it); and a table's access list
// judges callers by the uid ferryd recorded at their attach, which ferryd
// now passes with each request: this process's uid may push where it is
// listed and is refused Forbidden (PermissionDenied) where it is not.
// ShardService keeps the rows when its ferryd is killed, attaches to the
// restarted one and serves them on; without a reattach window it ends
// DaemonGone at once, and a stop while it waits for ferryd ends it Ok.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "ferry/ps/shard.h"
#include "ferry/ps/shard_link.h"
#include "ferry/ps/shard_server.h"
#include "ferry/ps/shard_service.h"
#include "ferry/ps/worker.h"
#include "tests/integration/harness.h"
#include "tests/ps/made.h"
#include "tests/ps/served.h"

using namespace ferry;
using namespace ferry::ps;
using namespace ferry::ps::test;
using namespace ferry::itest;

namespace {

TableSpec table(TableId id, std::vector<std::uint32_t> push) {
  TableSpec t;
  t.id = id;
  t.name = "t" + std::to_string(id);
  t.dim = 2;
  t.rows = 100;
  t.access.push = std::move(push);
  return t;
}

std::vector<float> pulled(Worker& w, const std::vector<Key>& keys) {
  const auto p = w.pull(0, keys);
  REQUIRE(p);
  REQUIRE(w.wait(p.value, 5s) == Status::Ok);
  const PulledRows r = w.rows(p.value);
  std::vector<float> out;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto row = static_cast<std::size_t>(r.index[i]);
    out.insert(out.end(), r.rows.begin() + static_cast<std::ptrdiff_t>(2 * row),
               r.rows.begin() + static_cast<std::ptrdiff_t>(2 * row + 2));
  }
  w.release(p.value);
  return out;
}

}  // namespace

TEST_CASE("shard service: the same rows served again on a restarted ferryd") {
  Daemon d;
  ShardSpec spec{0, 1, {table(0, {})}, 64};
  Service s(spec, d.socket(), 20s);
  const std::vector<Key> keys{1, 2, 3};
  std::vector<float> before;
  {
    const auto w = ferry_worker(d.socket(), spec.tables);
    auto tk = w->push(0, std::vector<Key>{1, 2}, std::vector<float>(4, 0.5f));
    REQUIRE(tk.status == Status::Ok);
    REQUIRE(w->wait(tk.value, 5s) == Status::Ok);
    w->release(tk.value);
    before = pulled(*w, keys);
  }
  d.restart();
  const auto t0 = Clock::now();
  while (s.service->reattached() == 0 && Clock::now() - t0 < 10s) std::this_thread::sleep_for(10ms);
  REQUIRE(s.service->reattached() == 1);
  CHECK(s.told.load() == 1);
  CHECK(s.result.load() == Status::Busy);  // still serving
  {
    const auto w = ferry_worker(d.socket(), spec.tables);
    CHECK(pulled(*w, keys) == before);  // the pushed rows and an untouched one, as before the restart
  }
  CHECK(s.shard->counters().pulls == 2);  // counted over both attachments
  s.end();
  CHECK(s.result.load() == Status::Ok);
}

TEST_CASE("shard service: no reattach window ends DaemonGone at once") {
  auto d = std::make_unique<Daemon>();
  Service s(ShardSpec{0, 1, {table(0, {})}, 64}, d->socket(), 0ms);
  std::this_thread::sleep_for(100ms);  // serving
  d->kill_hard();
  CHECK(s.ended_within(5s) == Status::DaemonGone);
  CHECK(s.service->reattached() == 0);
}

TEST_CASE("shard service: gives up DaemonGone after its window, and a stop while it waits ends Ok") {
  auto d = std::make_unique<Daemon>();
  Service gives_up(ShardSpec{0, 1, {table(0, {})}, 64}, d->socket(), 300ms);
  Service stopped(ShardSpec{1, 2, {table(0, {})}, 64}, d->socket(), 30s);
  std::this_thread::sleep_for(100ms);  // both serving
  const auto t0 = Clock::now();
  d->kill_hard();
  CHECK(gives_up.ended_within(5s) == Status::DaemonGone);
  CHECK(Clock::now() - t0 >= 300ms);
  CHECK(stopped.result.load() == Status::Busy);  // still waiting for ferryd
  stopped.end();
  CHECK(stopped.result.load() == Status::Ok);
  CHECK(stopped.service->reattached() == 0);
}

TEST_CASE("shard server: run() ends DaemonGone when its ferryd is killed") {
  auto d = std::make_unique<Daemon>();
  ShardSpec spec{0, 1, {table(0, {})}, 64};
  Served s(spec, d->socket());
  std::this_thread::sleep_for(100ms);  // serving
  d->kill_hard();
  const auto t0 = Clock::now();
  while (s.result.load() == Status::Busy && Clock::now() - t0 < 5s) std::this_thread::sleep_for(5ms);
  s.thread.join();
  CHECK(s.result.load() == Status::DaemonGone);
  CHECK(Clock::now() - t0 < 2s);
}

TEST_CASE("shard server: access lists judge the caller by the uid ferryd saw at its attach") {
  Daemon d;
  const std::uint32_t me = static_cast<std::uint32_t>(::getuid());
  ShardSpec spec{0, 1, {table(0, {me}), table(1, {me + 1, kRemoteCaller}), table(2, {})}, 64};
  Served s(spec, d.socket());
  const auto w_made = ferry_worker(d.socket(), spec.tables);
  Worker& w = *w_made;
  const std::vector<Key> keys{1, 2};
  const std::vector<float> g(4, 1.0f);
  for (TableId t : {TableId{0}, TableId{2}}) {
    auto tk = w.push(t, keys, g);
    REQUIRE(tk.status == Status::Ok);
    CHECK(w.wait(tk.value, 5s) == Status::Ok);
    w.release(tk.value);
  }
  auto tk = w.push(1, keys, g);
  REQUIRE(tk.status == Status::Ok);
  CHECK(w.wait(tk.value, 5s) == Status::PermissionDenied);
  CHECK(w.error(tk.value).ps == PsStatus::Forbidden);
  w.release(tk.value);
  CHECK(s.shard->counters().forbidden == 1);  // read while serving: a test's look, no writes race it now
}
