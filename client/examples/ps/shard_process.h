// A ferry-ps shard process's body over either transport: builds the Shard,
// serves it (ShardService over ferry, or the TCP loop) until stop_fd is
// readable, then says on stderr how many requests had to wait for a
// response buffer and how many Replies were refused and sent again (ferry),
// when any were: the tests read those lines.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ferry/ps/shard.h"
#include "ps_workload.h"

namespace ferry::ps::tool {

struct ShardProcessSpec {
  TransportKind kind = TransportKind::Ferry;
  std::string socket;  // ferry: the daemon to serve on
  std::string listen;  // tcp: HOST:PORT ("127.0.0.1:0" lets the OS pick)
  std::uint32_t pool = 16;
  bool busy_poll = false;
  // ferry: how long to attach again after ferryd went away, serving the
  // same rows on the new one (ps::ShardService); 0: end at once.
  std::uint32_t reattach_ms = 0;
  int stop_fd = -1;
  // Set-up only: called once serving (info: the bound HOST:PORT for tcp), or with the reason it cannot.
  std::function<void(const std::string& info)> ready;
  std::function<void(const std::string& why)> failed;
};

// 0 after a clean stop, nonzero on failure (already reported through failed()).
int serve_shard(Shard& shard, const ShardProcessSpec& spec);

}  // namespace ferry::ps::tool
