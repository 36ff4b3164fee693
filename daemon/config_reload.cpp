#include "daemon/config_reload.h"

#include <spdlog/spdlog.h>

#include <map>
#include <sstream>
#include <string_view>

namespace ferry::daemon {

namespace {

int g_argc = 0;
const char* const* g_argv = nullptr;

constexpr std::string_view kLiveKeys[] = {
    "log-level",          "tx-arena-bytes", "rx-arena-bytes", "max-tx-arena-bytes",
    "max-rx-arena-bytes", "sq-entries",     "cq-entries",
};

bool is_live(std::string_view key) {
  for (auto k : kLiveKeys) {
    if (k == key) return true;
  }
  return false;
}

// describe() output back into key -> value: one diff covers every key,
// including ones added later, without a second list to keep in step.
std::map<std::string, std::string> settings(const Config& c) {
  std::map<std::string, std::string> out;
  std::istringstream in(describe(c));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find(" = ");
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 3);
  }
  return out;
}

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
  const auto before = settings(live);
  const auto after = settings(next);
  for (const auto& [key, value] : after) {
    auto it = before.find(key);
    const std::string old = it == before.end() ? "" : it->second;
    if (old == value) continue;
    if (is_live(key)) {
      ++r.applied;
      spdlog::info("reload: {} changed {} -> {} (applied)", key, old, value);
    } else {
      ++r.need_restart;
      spdlog::warn("reload: {} changed {} -> {}: needs a restart, keeping {}", key, old, value, old);
    }
  }
  live.log_level = next.log_level;
  live.tx_arena_bytes = next.tx_arena_bytes;
  live.rx_arena_bytes = next.rx_arena_bytes;
  live.max_tx_arena_bytes = next.max_tx_arena_bytes;
  live.max_rx_arena_bytes = next.max_rx_arena_bytes;
  live.sq_entries = next.sq_entries;
  live.cq_entries = next.cq_entries;
  apply_log_level(live.log_level);
  r.ok = true;
  r.summary = "reloaded " + (live.config_file.empty() ? std::string("(no config file)") : live.config_file) + ": " +
              std::to_string(r.applied) + " applied, " + std::to_string(r.need_restart) + " need a restart";
  spdlog::info("{}", r.summary);
  return r;
}

}  // namespace ferry::daemon
