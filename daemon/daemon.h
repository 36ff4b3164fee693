// Assembling ferryd: runtime dir and sockets, the engine thread, the asio
// control thread (attach, control socket, signals), and orderly shutdown.
#pragma once

#include "daemon/config/config.h"

namespace ferry::daemon {

// Runs until SIGTERM/SIGINT. Returns the process exit code (0 on a clean
// shutdown, 1 when start-up failed).
int run_daemon(const Config& config);

}  // namespace ferry::daemon
