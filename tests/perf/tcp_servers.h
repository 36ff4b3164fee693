// The servers of the kernel-TCP baselines (tcp-rpc, tcp-relay-rpc): forked
// for one connection on --listen, or standalone for --target runs. `serve`
// answers one accepted, TCP_NODELAY connection and returns the process's
// exit code. Set-up only.
#pragma once

#include <string>

#include "bench_options.h"
#include "ferry/error.h"
#include "forked_server.h"

namespace ferry::bench {

using ServeConnection = int (*)(int fd);

// Forks `server` listening on `listen`; it serves the first connection with
// `serve`, then exits. *target gets the bound HOST:PORT. Fails when it
// could not listen or did not come up.
Error fork_tcp_server(ForkedServer& server, const std::string& listen, ServeConnection serve, std::string* target);

// `ferry-bench NAME --listen HOST:PORT`: one process per accepted connection
// runs `serve`, until killed. Returns 1 when it cannot listen.
int serve_tcp_forever(const BenchOptions& options, const char* name, ServeConnection serve);

}  // namespace ferry::bench
