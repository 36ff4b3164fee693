// libferry's log (log.h): the level, the application's callback, and the
// stderr line when there is none.
#include "client/src/log.h"

#include <unistd.h>

#include <strings.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ferry {

std::string_view to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warn: return "warn";
    case LogLevel::Error: return "error";
    case LogLevel::Off: return "off";
  }
  return "Unknown";
}

namespace client_detail {

std::optional<LogLevel> parse_log_level(std::string_view text) noexcept {
  struct Name {
    const char* name;
    LogLevel level;
  };
  static constexpr Name kNames[] = {
      {"debug", LogLevel::Debug},  {"info", LogLevel::Info},   {"warn", LogLevel::Warn},
      {"warning", LogLevel::Warn}, {"error", LogLevel::Error}, {"off", LogLevel::Off},
  };
  for (const Name& n : kNames) {
    if (text.size() == std::strlen(n.name) && ::strncasecmp(text.data(), n.name, text.size()) == 0) return n.level;
  }
  return std::nullopt;
}

Log::Log(LogCallback sink, std::optional<LogLevel> level) : sink_(std::move(sink)) {
  if (!level) {
    const char* env = std::getenv("FERRY_LOG_LEVEL");
    if (env != nullptr) level = parse_log_level(env);
  }
  level_ = level.value_or(LogLevel::Error);
}

void Log::say(LogLevel level, const char* format, ...) const noexcept {
  if (!enabled(level)) return;
  char text[512];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  if (n < 0) return;
  const std::string_view message(text, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof text - 1));
  if (sink_) {
    try {
      sink_(level, message);
    } catch (...) {
      // The application's callback failed; the message is lost, the client goes on.
    }
    return;
  }
  // One write per line, so lines from several threads do not interleave.
  char line[600];
  const int len = std::snprintf(line, sizeof line, "ferry: %s: %.*s\n", to_string(level).data(),
                                static_cast<int>(message.size()), message.data());
  if (len > 0)
    (void)!::write(STDERR_FILENO, line, std::min<std::size_t>(static_cast<std::size_t>(len), sizeof line - 1));
}

}  // namespace client_detail
}  // namespace ferry
