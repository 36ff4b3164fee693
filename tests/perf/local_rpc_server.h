// The "bench-echo" server that local-rpc forks: attaches to the daemon at
// --server-socket, serves bench-echo and answers each request with a
// response of the same size (response pattern + the request's stamp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "forked_server.h"

namespace ferry::bench {

inline constexpr std::string_view kBenchEchoService = "bench-echo";
// The service name the forked server serves and the client opens:
// $FERRY_BENCH_SERVICE when set (several ferry-bench runs against one server
// daemon at once, tests/rdma/bench-rails.sh), else kBenchEchoService.
inline std::string bench_echo_service() {
  const char* v = std::getenv("FERRY_BENCH_SERVICE");
  return v != nullptr && *v != 0 ? std::string(v) : std::string(kBenchEchoService);
}

// Runs in the forked child until ready.stop_fd() reports EOF or the daemon
// goes away; returns the child's exit code.
// busy_poll: spin on the completion ring instead of sleeping on its fd.
// delay_us: each request is answered this long after it arrived; the server
// sleeps meanwhile (a server that computes elsewhere), spinning only when
// busy_poll.
int serve_bench_echo(const std::string& socket, std::size_t size, std::uint32_t concurrency, bool busy_poll,
                     std::uint32_t delay_us, ReadyNotifier& ready);

}  // namespace ferry::bench
