#include "ferry/ps/shard_service.h"

#include <poll.h>

#include "ferry/retry_pause.h"

namespace ferry::ps {

Error ShardService::start(Shard& shard, ShardServiceOptions options, std::unique_ptr<ShardService>* out) {
  std::unique_ptr<ShardServer> server;
  if (Error e = ShardServer::start(shard, options.server, &server); e.failed()) return e;
  out->reset(new ShardService(shard, std::move(options), std::move(server)));
  return {};
}

ShardService::ShardService(Shard& shard, ShardServiceOptions options, std::unique_ptr<ShardServer> server)
    : shard_(shard), options_(std::move(options)), service_(server->service()), server_(std::move(server)) {}

ShardService::~ShardService() = default;

Status ShardService::run(int stop_fd) noexcept {
  for (;;) {
    // Only this thread replaces server_: it reads it without the lock.
    Status result = server_->run(stop_fd);
    if (result != Status::DaemonGone || !attach_again(stop_fd, &result)) return result;
    if (options_.on_reattached) options_.on_reattached();
  }
}

ShardServerCounters ShardService::counters() const noexcept {
  std::lock_guard<std::mutex> g(mu_);
  ShardServerCounters c = server_ ? server_->counters() : ShardServerCounters{};
  c.waited += before_.waited;
  c.refusals += before_.refusals;
  return c;
}

std::uint64_t ShardService::reattached() const noexcept {
  std::lock_guard<std::mutex> g(mu_);
  return reattached_;
}

// After ferryd went away: true once the shard serves again over a new
// attachment; false when stop_fd fired (*result Ok) or `reattach` passed
// (*result stays DaemonGone).
bool ShardService::attach_again(int stop_fd, Status* result) noexcept {
  if (options_.reattach.count() == 0) return false;
  std::unique_ptr<ShardServer> old;
  {
    std::lock_guard<std::mutex> g(mu_);
    const ShardServerCounters c = server_->counters();
    before_.waited += c.waited;
    before_.refusals += c.refusals;
    old = std::move(server_);
  }
  old.reset();  // outside the lock counters() takes: the old attachment and its arenas go first
  const auto deadline = std::chrono::steady_clock::now() + options_.reattach;
  RetryPause pause;
  for (;;) {
    pollfd p{stop_fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(pause.next().count())) > 0) {
      *result = Status::Ok;  // stopped while waiting for ferryd
      return false;
    }
    std::unique_ptr<ShardServer> next;
    if (!ShardServer::start(shard_, options_.server, &next).failed()) {
      std::lock_guard<std::mutex> g(mu_);
      server_ = std::move(next);
      ++reattached_;
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
  }
}

}  // namespace ferry::ps
