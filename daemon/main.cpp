// ferryd: the per-host ferry daemon. Its structure: daemon/daemon.h; its options: daemon/config/config.h.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <string>

#include "daemon/config/config.h"
#include "daemon/config/config_reload.h"
#include "daemon/config/config_rules.h"
#include "daemon/daemon.h"

int main(int argc, char** argv) {
  auto parsed = ferry::daemon::parse_command_line(argc, argv);
  if (parsed.exit_code >= 0) return parsed.exit_code;
  if (parsed.check_config) {
    // Errors were printed (exit 2) by the parser; here everything is valid.
    std::printf("configuration OK\n");
    for (const std::string& caution : ferry::daemon::config_cautions(parsed.config))
      std::printf("caution: %s\n", caution.c_str());
    std::printf("%s", ferry::daemon::describe(parsed.config).c_str());
    return 0;
  }
  ferry::daemon::remember_command_line(argc, argv);
  ferry::daemon::apply_log_level(parsed.config.log_level);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [ferryd] [%^%l%$] %v");
  try {
    return ferry::daemon::run_daemon(parsed.config);
  } catch (const std::exception& e) {  // start-up failures only: the datapath does not throw
    spdlog::critical("fatal: {}", e.what());
    return 1;
  }
}
