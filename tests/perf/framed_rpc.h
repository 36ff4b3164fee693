// The request/response protocol of the kernel-socket baselines (uds-rpc,
// tcp-rpc), both sides. Same payload rules as the ferry scenarios
// (payload.h), so the work per operation is the same apart from transport.
#pragma once

#include "scenario.h"

namespace ferry::bench {

// Server: for each request answer with a response of the same length that
// carries the response pattern and the request's stamp. Returns 0 at an
// orderly EOF, 1 on error.
int serve_framed_echo(int fd);

// Client: warm-up, then the measured ping-pong over a connected socket.
Outcome run_framed_rpc(int fd, ScenarioContext& ctx);

}  // namespace ferry::bench
