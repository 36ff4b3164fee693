// SIGHUP: parse the command line and the config file again and apply what
// can change while ferryd runs. Control (asio) thread only.
//
// What may change live is a column of the option table (config_keys.cpp,
// Reload): Live keys (log-level, admin-group, the control-socket limits)
// apply at once; NewClients keys (segment sizes and ring entries, the quotas)
// apply to clients that attach from now on (only the attach server reads
// them, on this same thread). Everything else is read by the engine or at
// start-up: a change is logged as "needs a restart" and the running value
// stays. An invalid configuration is rejected whole.
#pragma once

#include <string>

#include "daemon/config/config.h"

namespace ferry::daemon {

// Main calls this once so a reload parses the same flags (flags keep
// overriding the file). argv must outlive the daemon (main's own does).
void remember_command_line(int argc, const char* const* argv);

void apply_log_level(LogLevel level);

struct ReloadOutcome {
  bool ok = false;       // false: the new configuration was invalid; nothing changed
  int applied = 0;       // keys changed live
  int need_restart = 0;  // keys whose change waits for a restart
  std::string summary;   // one line for the log and systemd's STATUS=
};

// Re-parses, logs every difference, and updates `live` with the keys above.
ReloadOutcome reload_config(Config& live);

}  // namespace ferry::daemon
