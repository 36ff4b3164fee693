// The call pump behind local-rpc and remote-rpc: forks the bench-echo
// server on the daemon at --server-socket, attaches the measuring client
// to the daemon at --socket, opens `target` ("bench-echo" or
// "HOST:PORT/bench-echo") and keeps --concurrency calls outstanding.
#pragma once

#include <string>

#include "scenario.h"

namespace ferry::bench {

Outcome run_echo_rpc(ScenarioContext& ctx, const std::string& target, const std::string& client_name);

}  // namespace ferry::bench
