// ferryd: the per-host ferry daemon. See DESIGN.md ("Shape") and daemon/daemon.h.
#include <spdlog/spdlog.h>

#include <exception>

#include "daemon/config.h"
#include "daemon/daemon.h"

namespace {

spdlog::level::level_enum to_spdlog(ferry::daemon::LogLevel l) {
  using ferry::daemon::LogLevel;
  switch (l) {
    case LogLevel::Trace: return spdlog::level::trace;
    case LogLevel::Debug: return spdlog::level::debug;
    case LogLevel::Info: return spdlog::level::info;
    case LogLevel::Warn: return spdlog::level::warn;
    case LogLevel::Error: return spdlog::level::err;
  }
  return spdlog::level::info;
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = ferry::daemon::parse_command_line(argc, argv);
  if (parsed.exit_code >= 0) return parsed.exit_code;
  spdlog::set_level(to_spdlog(parsed.config.log_level));
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [ferryd] [%^%l%$] %v");
  try {
    return ferry::daemon::run_daemon(parsed.config);
  } catch (const std::exception& e) {  // start-up failures only: the datapath does not throw
    spdlog::critical("fatal: {}", e.what());
    return 1;
  }
}
