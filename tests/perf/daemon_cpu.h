// The daemon's own CPU time, read over its control socket, so a benchmark
// can charge the daemon's share (busy polling included) to each operation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ferry::bench {

// cpu_user_us + cpu_sys_us from the daemon's status; nullopt when the
// control socket cannot be reached or lacks the fields.
std::optional<std::uint64_t> read_daemon_cpu_us(const std::string& control_path);

// The control socket beside a client socket: dirname(socket)/control.sock.
std::string control_path_for(const std::string& client_socket);

}  // namespace ferry::bench
