// A shard served over a real ferryd on a thread of the test: Served
// (ShardServer::run) and Service (ShardService::run, across restarts of
// its ferryd), each stopped by its destructor through a pipe; and a
// worker of those shards on the same ferryd.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ferry/ps/shard.h"
#include "ferry/ps/shard_link.h"
#include "ferry/ps/shard_server.h"
#include "ferry/ps/shard_service.h"
#include "ferry/ps/worker.h"
#include "tests/ps/made.h"

namespace ferry::ps::test {

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

// A ShardService on a thread of its own until the destructor stops it.
struct Service {
  std::unique_ptr<Shard> shard;
  std::unique_ptr<ShardService> service;
  std::thread thread;
  std::atomic<Status> result{Status::Busy};
  std::atomic<int> told{0};  // on_reattached calls
  int stop[2] = {-1, -1};

  Service(const ShardSpec& spec, const std::string& socket, std::chrono::milliseconds reattach)
      : shard(made_shard(spec)) {
    ShardServiceOptions o;
    o.server.socket = socket;
    o.reattach = reattach;
    o.on_reattached = [this] { told.fetch_add(1); };
    const Error started = ShardService::start(*shard, std::move(o), &service);
    INFO(started.message());
    REQUIRE(started.ok());
    REQUIRE(::pipe2(stop, O_CLOEXEC) == 0);
    thread = std::thread([this] { result.store(service->run(stop[0])); });
  }
  void end() {
    if (stop[1] >= 0) ::close(stop[1]);
    stop[1] = -1;
    if (thread.joinable()) thread.join();
  }
  ~Service() {
    end();
    if (stop[0] >= 0) ::close(stop[0]);
  }
  // Waits up to `within` for run() to return; its result (Busy: still running).
  Status ended_within(std::chrono::milliseconds within) {
    const auto t0 = std::chrono::steady_clock::now();
    while (result.load() == Status::Busy && std::chrono::steady_clock::now() - t0 < within)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return result.load();
  }
};

// A worker for `tables` on the ferryd at `socket` (the shards on it), with
// `wo`'s other options; `relink`: it attaches again when that ferryd restarts.
inline std::unique_ptr<Worker> ferry_worker(const std::string& socket, const std::vector<TableSpec>& tables,
                                            bool relink = false, WorkerOptions wo = {}) {
  FerryLinkOptions f;
  f.socket = socket;
  f.call_timeout = wo.timeout;
  std::unique_ptr<ShardLink> link;
  const Error connected = connect_ferry(f, &link);
  INFO(connected.message());
  REQUIRE(connected.ok());
  wo.tables = tables;
  if (relink) wo.relink = ferry_relink(f);
  return made_worker(std::move(link), wo);
}

}  // namespace ferry::ps::test
