// The "bench-echo" server that local-rpc forks: attaches to the daemon at
// --server-socket, serves bench-echo and answers each request with a
// response of the same size (response pattern + the request's stamp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "forked_server.h"

namespace ferry::bench {

inline constexpr std::string_view kBenchEchoService = "bench-echo";

// Runs in the forked child until ready.stop_fd() reports EOF or the daemon
// goes away; returns the child's exit code.
// busy_poll: spin on the completion ring instead of sleeping on its fd.
// delay_us: each request is answered this long after it arrived; the server
// sleeps meanwhile (a server that computes elsewhere), spinning only when
// busy_poll.
int serve_bench_echo(const std::string& socket, std::size_t size, std::uint32_t concurrency, bool busy_poll,
                     std::uint32_t delay_us, ReadyNotifier& ready);

}  // namespace ferry::bench
