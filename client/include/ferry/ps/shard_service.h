// A shard served across restarts of its ferryd. ShardServer serves one
// attachment and ends DaemonGone when that ferryd goes away; ShardService
// keeps the Shard (its rows) and, for up to `reattach`, attaches again
// (tries 100 ms apart, doubling to 2 s: ferry::RetryPause) and serves the
// same rows under the same service on the new ferryd. Workers find it
// again at their next call (ferry.ps.Worker attaches again too). What
// `python3 -m ferry.ps.server` and `ferry-ps server` serve with.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "ferry/error.h"
#include "ferry/ps/shard.h"
#include "ferry/ps/shard_server.h"
#include "ferry/visibility.h"

namespace ferry::ps {

struct ShardServiceOptions {
  ShardServerOptions server;
  // How long to try attaching again after ferryd went away; 0: run() ends
  // DaemonGone at once, as ShardServer::run does.
  std::chrono::milliseconds reattach{60000};
  // Called on run()'s thread each time the shard serves again on a new
  // ferryd (reattached() already counts it). It must not throw: run() is
  // noexcept, so an exception leaving it ends the process.
  std::function<void()> on_reattached{};
};

class FERRY_API ShardService {
 public:
  // Attaches and serves, as ShardServer::start; `shard` must outlive it.
  [[nodiscard]] static Error start(Shard& shard, ShardServiceOptions options, std::unique_ptr<ShardService>* out);
  ~ShardService();
  ShardService(const ShardService&) = delete;
  ShardService& operator=(const ShardService&) = delete;

  // Serves until stop_fd becomes readable (or hangs up), also while it
  // waits for ferryd to come back: Ok then; DaemonGone when ferryd went
  // away and was not back (or no attach succeeded) within `reattach`.
  [[nodiscard]] Status run(int stop_fd) noexcept;

  // Summed over every attachment so far; safe from any thread while run() serves.
  ShardServerCounters counters() const noexcept;
  // How many times it attached again and served on after ferryd went away.
  std::uint64_t reattached() const noexcept;
  const std::string& service() const noexcept { return service_; }

 private:
  FERRY_LOCAL ShardService(Shard& shard, ShardServiceOptions options, std::unique_ptr<ShardServer> server);
  FERRY_LOCAL bool attach_again(int stop_fd, Status* result) noexcept;

  Shard& shard_;
  ShardServiceOptions options_;
  std::string service_;
  mutable std::mutex mu_;                // server_, before_ and reattached_ while run() replaces them
  std::unique_ptr<ShardServer> server_;  // null while ferryd is away
  ShardServerCounters before_;           // the earlier attachments' counters
  std::uint64_t reattached_ = 0;
};

}  // namespace ferry::ps
