// The scenarios ferry-bench knows, in the order --help lists them.
#include <array>

#include "scenarios.h"

namespace ferry::bench {

namespace {

constexpr std::array kScenarios = {
    ScenarioSpec{"uds-rpc", "baseline: request/response over a Unix stream socket to a forked server (blocking I/O)",
                 run_uds_rpc, 2},
    ScenarioSpec{"tcp-rpc", "baseline: request/response over kernel TCP (loopback or --target), TCP_NODELAY",
                 run_tcp_rpc, 2},
    ScenarioSpec{"tcp-relay-rpc",
                 "baseline: tcp-rpc in ferry's process shape, a relay process on each side (--target: a "
                 "tcp-relay-server)",
                 run_tcp_relay_rpc, 2},
    ScenarioSpec{"shm-pingpong",
                 "baseline: two processes spin on shared memory, one cache line each way (ipc-echo's floor)",
                 run_shm_pingpong, 1},
    ScenarioSpec{"ipc-echo", "one client sends to a service it serves itself: ring -> daemon -> delivery", run_ipc_echo,
                 1},
    ScenarioSpec{"local-rpc", "calls to a forked server process through the daemon (bench-echo)", run_local_rpc, 2},
    ScenarioSpec{"remote-rpc", "calls to a forked server on another daemon (--server-socket, --target = its --listen)",
                 run_remote_rpc, 2},
    ScenarioSpec{"incast", "--senders processes over the --socket daemons send to one service at --server-socket",
                 run_incast, 1},
};

}  // namespace

const ScenarioSpec* find_scenario(std::string_view name) {
  for (const auto& s : kScenarios)
    if (s.name == name) return &s;
  return nullptr;
}

void print_scenarios(std::FILE* out) {
  for (const auto& s : kScenarios)
    std::fprintf(out, "  %-12.*s %.*s\n", static_cast<int>(s.name.size()), s.name.data(),
                 static_cast<int>(s.summary.size()), s.summary.data());
  std::fprintf(out, "  %-12s %s\n", "tcp-server", "serve tcp-rpc on --listen HOST:PORT until killed");
  std::fprintf(out, "  %-12s %s\n", "tcp-relay-server", "serve tcp-relay-rpc on --listen HOST:PORT until killed");
}

}  // namespace ferry::bench
