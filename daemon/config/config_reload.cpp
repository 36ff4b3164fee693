#include "daemon/config/config_reload.h"

#include <spdlog/spdlog.h>

#include <sstream>
#include <string_view>

#include "daemon/config/config_keys.h"

namespace ferry::daemon {

namespace {

int g_argc = 0;
const char* const* g_argv = nullptr;

spdlog::level::level_enum to_spdlog(LogLevel l) {
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

void remember_command_line(int argc, const char* const* argv) {
  g_argc = argc;
  g_argv = argv;
}

void apply_log_level(LogLevel level) { spdlog::set_level(to_spdlog(level)); }

ReloadOutcome reload_config(Config& live) {
  ReloadOutcome r;
  if (g_argv == nullptr) {
    r.summary = "reload: command line unknown; nothing changed";
    spdlog::warn("{}", r.summary);
    return r;
  }
  std::ostringstream errors;
  ParseOutcome parsed = parse_command_line(g_argc, g_argv, errors);
  if (parsed.exit_code >= 0) {
    std::string why = errors.str();
    while (!why.empty() && why.back() == '\n') why.pop_back();
    r.summary = "reload rejected, running configuration kept: " + why;
    spdlog::error("{}", r.summary);
    return r;
  }
  const Config& next = parsed.config;
  // The change is made on a copy and kept only whole.
  Config updated = live;
  for (const ConfigKey& k : config_keys()) {
    if (k.scope != Scope::Anywhere) continue;
    const std::string old = value_text(k, live);
    const std::string value = value_text(k, next);
    if (old == value) continue;
    if (k.reload == Reload::Live || k.reload == Reload::NewClients) {
      if (const Error bad = k.access.parse(updated, value); bad.failed()) {  // cannot fail: `next` parsed it
        r.summary = "reload rejected, running configuration kept: " + std::string(k.name) + ": " + bad.message();
        spdlog::error("{}", r.summary);
        return r;
      }
      ++r.applied;
      spdlog::info("reload: {} changed {} -> {} (applied{})", k.name, old, value,
                   k.reload == Reload::NewClients ? " to clients attaching from now on" : "");
    } else {
      ++r.need_restart;
      spdlog::warn("reload: {} changed {} -> {}: needs a restart, keeping {}", k.name, old, value, old);
    }
  }
  live = updated;
  apply_log_level(live.log_level);
  r.ok = true;
  r.summary = "reloaded " + (live.config_file.empty() ? std::string("(no config file)") : live.config_file) + ": " +
              std::to_string(r.applied) + " applied, " + std::to_string(r.need_restart) + " need a restart";
  spdlog::info("{}", r.summary);
  return r;
}

}  // namespace ferry::daemon
