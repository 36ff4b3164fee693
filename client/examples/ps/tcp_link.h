// The kernel-TCP baseline of ferry-ps: a ShardLink where this process holds
// its own connection to every shard (TCP_NODELAY, blocking I/O, 4-byte
// length prefix), the way a parameter-server stack without ferry does it,
// and the matching shard loop (one thread, poll() for readiness, blocking
// reads of a whole frame and a blocking write of the response).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ferry/error.h"
#include "ferry/ps/shard.h"
#include "ferry/ps/shard_link.h"

namespace ferry::ps::tool {

// Connects to every shard (HOST:PORT each) into *out; the Error is the first
// connection's that failed.
Error connect_tcp(const std::vector<std::string>& shard_addresses, std::unique_ptr<ShardLink>* out);

// Listens on `listen` ("127.0.0.1:0" lets the OS pick), calls ready(bound
// HOST:PORT), serves until stop_fd is readable. 0 after a clean stop.
int serve_shard_tcp(Shard& shard, const std::string& listen, int stop_fd,
                    const std::function<void(const std::string&)>& ready,
                    const std::function<void(const std::string&)>& failed);

}  // namespace ferry::ps::tool
