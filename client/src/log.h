// libferry's own log: what one client says about itself (a daemon that
// broke the protocol, a release it rejected, the daemon hanging up). It
// goes to the application's AttachOptions::log callback, or as one line to
// stderr, and only at or above the client's level: AttachOptions::log_level,
// else $FERRY_LOG_LEVEL, else Error, so a normal run writes nothing. Never
// a global logger: the application's own logging is its business.
#pragma once

#include <cstdarg>
#include <optional>
#include <string_view>

#include "ferry/client.h"

namespace ferry::client_detail {

// "debug", "info", "warn" (or "warning"), "error", "off"; nullopt otherwise.
std::optional<LogLevel> parse_log_level(std::string_view text) noexcept;

class Log {
 public:
  Log() = default;
  // level: nullopt takes $FERRY_LOG_LEVEL, else Error.
  Log(LogCallback sink, std::optional<LogLevel> level);

  bool enabled(LogLevel level) const noexcept { return level >= level_ && level_ != LogLevel::Off; }
  // printf-style; a message longer than 512 bytes is cut. Never throws: a
  // callback that throws loses that message.
  void say(LogLevel level, const char* format, ...) const noexcept __attribute__((format(printf, 3, 4)));

 private:
  LogCallback sink_;
  LogLevel level_ = LogLevel::Error;
};

}  // namespace ferry::client_detail
