// ferryctl's commands: fetch from the daemon, print, map failures to exit
// codes (0 ok, 1 daemon error or unreachable, 2 usage error).
#pragma once

#include "control/ferryctl_options.h"

namespace ferry::ctl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitDaemon = 1;
inline constexpr int kExitUsage = 2;

int run_command(const Options& o);

}  // namespace ferry::ctl
