// A shard served over ferry: attaches to ferryd, serves PREFIX<index>, and
// answers each request (Shard::handle) with a Reply from a pool of response
// buffers preallocated in the tx arena. A request that finds the pool empty
// waits, unreleased, until a Reply completes (bounded by the rx arena). A
// request is applied once: its answer stays in its buffer until the Reply
// completes, and a Reply the submission ring refuses, or that completes
// Busy (no room toward a remote caller now; the call is still open), goes
// again from that buffer with the same token. A Save step is written in
// the background (Shard::begin_save): its buffer waits for the disk while
// the other requests are answered, the step's rows copied for the writer
// a piece at a time between them; Save steps behind it wait their turn.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ferry/client.h"
#include "ferry/error.h"
#include "ferry/ps/shard.h"
#include "ferry/visibility.h"

namespace ferry::ps {

struct ShardServerOptions {
  std::string socket;  // the shard's ferryd; empty: $FERRY_SOCKET or the default
  std::string service_prefix = "ps-shard-";
  std::string name;         // shown by ferryctl clients; empty: the service name
  std::uint32_t pool = 64;  // response buffers: Replies in flight at once
  bool busy_poll = false;
};

struct ShardServerCounters {
  std::uint64_t waited = 0;    // requests that queued for a response buffer
  std::uint64_t refusals = 0;  // Replies refused Busy (ring full, or at completion), each sent again
};

class FERRY_API ShardServer {
 public:
  // Attaches, allocates the pool and serves the shard's service, into
  // *out. On failure the Error says what failed. `shard` must outlive
  // the server.
  [[nodiscard]] static Error start(Shard& shard, const ShardServerOptions& options, std::unique_ptr<ShardServer>* out);
  ~ShardServer();
  ShardServer(const ShardServer&) = delete;
  ShardServer& operator=(const ShardServer&) = delete;

  // Serves until stop_fd becomes readable (or hangs up): Ok then; the
  // daemon's status (DaemonGone) when ferryd went away.
  [[nodiscard]] Status run(int stop_fd) noexcept;

  // A snapshot; safe from any thread while run() serves.
  ShardServerCounters counters() const noexcept { return {waited_.get(), refusals_.get()}; }
  const std::string& service() const noexcept { return service_; }

 private:
  FERRY_LOCAL ShardServer(Shard& shard, const ShardServerOptions& options, std::unique_ptr<Client> client);
  FERRY_LOCAL void on_completion(const Completion& c) noexcept;
  FERRY_LOCAL bool answer(const Completion& c) noexcept;
  FERRY_LOCAL void resend_refused() noexcept;
  FERRY_LOCAL void drain_pending() noexcept;
  FERRY_LOCAL void advance_save() noexcept;
  FERRY_LOCAL void send(std::uint32_t b) noexcept;

  static constexpr std::size_t kBatch = 64;
  struct Sent {
    std::uint64_t token = 0;
    std::uint32_t length = 0;
  };

  Shard& shard_;
  ShardServerOptions options_;
  std::unique_ptr<Client> client_;
  std::string service_;
  std::size_t response_bytes_ = 0;
  std::vector<Buffer> buffers_;
  std::vector<std::uint32_t> free_;
  std::vector<Sent> sent_;              // per buffer: the Reply it carries
  std::vector<std::uint32_t> refused_;  // buffers whose Reply was refused Busy
  std::vector<Completion> pending_;     // requests waiting for a buffer, oldest first
  std::vector<Completion> saves_;       // Save steps waiting for the one in the background, oldest first
  static constexpr std::uint32_t kNoBuffer = ~0u;
  std::uint32_t saving_ = kNoBuffer;  // the buffer of the Save step in the background
  detail::Tally waited_;              // ShardServerCounters::waited
  detail::Tally refusals_;            // ShardServerCounters::refusals
  std::array<Completion, kBatch> batch_{};
};

}  // namespace ferry::ps
