// Reading and writing option values: numbers with size suffixes, the text
// of a value, of a default and of a range (config_keys.h).
#include <charconv>

#include "daemon/config/config_keys.h"

namespace ferry::daemon {

std::string_view to_string(SpinHold h) noexcept {
  switch (h) {
    case SpinHold::Auto: return "auto";
    case SpinHold::On: return "on";
    case SpinHold::Off: return "off";
  }
  return "unknown";
}

std::string_view to_string(Transport t) noexcept {
  switch (t) {
    case Transport::Auto: return "auto";
    case Transport::Rdma: return "rdma";
    case Transport::Tcp: return "tcp";
  }
  return "unknown";
}

std::string_view to_string(LogLevel l) noexcept {
  switch (l) {
    case LogLevel::Trace: return "trace";
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warn: return "warn";
    case LogLevel::Error: return "error";
  }
  return "unknown";
}

std::string_view to_string(ValueKind k) noexcept {
  switch (k) {
    case ValueKind::Number: return "number";
    case ValueKind::Text: return "text";
    case ValueKind::Choice: return "choice";
    case ValueKind::Flag: return "flag";
  }
  return "unknown";
}

std::string_view to_string(Unit u) noexcept {
  switch (u) {
    case Unit::None: return "";
    case Unit::Bytes: return "bytes";
    case Unit::Millis: return "ms";
    case Unit::Micros: return "us";
    case Unit::Entries: return "entries";
    case Unit::Count: return "count";
  }
  return "unknown";
}

std::string_view to_string(Reload r) noexcept {
  switch (r) {
    case Reload::Restart: return "restart";
    case Reload::Live: return "live";
    case Reload::NewClients: return "new-clients";
    case Reload::Never: return "never";
  }
  return "unknown";
}

std::optional<std::uint64_t> parse_u64(std::string_view s) noexcept {
  if (s.empty()) return std::nullopt;
  std::uint64_t mult = 1;
  const char last = s.back();
  if (last == 'k' || last == 'K') mult = kKiB;
  if (last == 'm' || last == 'M') mult = kMiB;
  if (last == 'g' || last == 'G') mult = kGiB;
  if (mult != 1) s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  if (v > UINT64_MAX / mult) return std::nullopt;
  return v * mult;
}

std::string format_size(std::uint64_t v) {
  if (v != 0 && v % kGiB == 0) return std::to_string(v / kGiB) + "g";
  if (v != 0 && v % kMiB == 0) return std::to_string(v / kMiB) + "m";
  return std::to_string(v);
}

namespace {

std::string number_text(const ConfigKey& key, std::uint64_t v) {
  return key.unit == Unit::Bytes ? format_size(v) : std::to_string(v);
}

}  // namespace

std::string value_text(const ConfigKey& key, const Config& c) {
  if (key.access.number != nullptr) return number_text(key, key.access.number(c));
  if (key.access.text != nullptr) return key.access.text(c);
  return {};
}

std::string default_text(const ConfigKey& key) { return value_text(key, Config{}); }

std::string range_text(const ConfigKey& key) {
  if (key.kind == ValueKind::Choice) {
    std::string out = "one of ";
    std::string_view rest = key.choices;
    for (bool first = true; !rest.empty(); first = false) {
      const auto bar = rest.find('|');
      if (!first) out += ", ";
      out += rest.substr(0, bar);
      rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
    }
    return out;
  }
  if (key.kind != ValueKind::Number) return {};
  const std::string hi = key.max_key.empty() ? number_text(key, key.max) : std::string(key.max_key);
  return std::string(key.power_of_two ? "a power of two " : "") + "in [" + number_text(key, key.min) + ", " + hi + "]";
}

}  // namespace ferry::daemon
