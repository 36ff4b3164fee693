// A shard served over a real ferryd, in C++:
// ShardServer::run() ends with DaemonGone soon after its ferryd is killed
// (the library half of "the shard exits when ferryd goes away"; `ferry-ps
// server` and the Python server exit on it); and a table's access list
// judges callers by the uid ferryd recorded at their attach, which ferryd
// now passes with each request: this process's uid may push where it is
// listed and is refused Forbidden (PermissionDenied) where it is not.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "ferry/ps/shard.h"
#include "ferry/ps/shard_link.h"
#include "ferry/ps/shard_server.h"
#include "ferry/ps/worker.h"
#include "tests/integration/harness.h"
#include "tests/ps/made.h"

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

struct Served {
  std::unique_ptr<Shard> shard;
  std::unique_ptr<ShardServer> server;
  std::thread thread;
  std::atomic<Status> result{Status::Busy};
  int stop[2] = {-1, -1};

  Served(const ShardSpec& spec, const std::string& socket) : shard(made_shard(spec)) {
    ShardServerOptions o;
    o.socket = socket;
    const Error started = ShardServer::start(*shard, o, &server);
    INFO(started.message());
    REQUIRE(started.ok());
    REQUIRE(::pipe2(stop, O_CLOEXEC) == 0);
    thread = std::thread([this] { result.store(server->run(stop[0])); });
  }
  ~Served() {
    if (stop[1] >= 0) ::close(stop[1]);
    if (thread.joinable()) thread.join();
    if (stop[0] >= 0) ::close(stop[0]);
  }
};

}  // namespace

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
  FerryLinkOptions f;
  f.socket = d.socket();
  std::unique_ptr<ShardLink> link;
  const Error connected = connect_ferry(f, &link);
  INFO(connected.message());
  REQUIRE(connected.ok());
  WorkerOptions wo;
  wo.tables = spec.tables;
  const auto w_made = made_worker(std::move(link), wo);
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
