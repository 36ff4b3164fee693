#include "daemon/engines/target.h"

#include <algorithm>
#include <charconv>

#include "daemon/session/validate.h"

namespace ferry::daemon {

std::string_view to_string(TargetKind k) noexcept {
  switch (k) {
    case TargetKind::Invalid: return "Invalid";
    case TargetKind::Local: return "Local";
    case TargetKind::Remote: return "Remote";
  }
  return "Unknown";
}

namespace {

std::optional<std::uint16_t> parse_port(std::string_view s) noexcept {
  unsigned v = 0;
  if (s.empty() || s.size() > 5) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v == 0 || v > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

bool valid_host_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

bool is_wildcard(std::string_view h) noexcept { return h == "0.0.0.0" || h == "::" || h == "*"; }
bool is_loopback(std::string_view h) noexcept {
  return h == "localhost" || h == "::1" || (h.size() >= 4 && h.substr(0, 4) == "127.");
}

}  // namespace

std::optional<HostPort> parse_host_port(std::string_view text) noexcept {
  HostPort hp;
  std::string_view host;
  std::string_view rest;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close == 1) return std::nullopt;
    host = text.substr(1, close - 1);
    for (char c : host) {
      bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.';
      if (!ok) return std::nullopt;
    }
    rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return std::nullopt;
  } else {
    auto colon = text.find(':');
    host = text.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon);
    if (host.empty()) return std::nullopt;
    for (char c : host) {
      if (!valid_host_char(c)) return std::nullopt;
    }
  }
  if (!rest.empty()) {
    auto port = parse_port(rest.substr(1));
    if (!port) return std::nullopt;
    hp.port = *port;
  }
  hp.host = std::string(host);
  return hp;
}

Target parse_target(std::string_view text, const std::optional<HostPort>& own,
                    std::span<const std::uint16_t> own_ports) noexcept {
  Target t;
  auto slash = text.rfind('/');
  if (slash == std::string_view::npos) {
    if (!valid_service_name(text)) return t;
    t.kind = TargetKind::Local;
    t.service = text;
    return t;
  }
  std::string_view service = text.substr(slash + 1);
  if (!valid_service_name(service)) return t;
  auto hp = parse_host_port(text.substr(0, slash));
  if (!hp) return t;
  t.service = service;
  bool local = false;
  const bool ours =
      hp->port != 0 && own &&
      (hp->port == own->port || std::find(own_ports.begin(), own_ports.end(), hp->port) != own_ports.end());
  if (ours) {
    local = hp->host == own->host || (is_wildcard(own->host) && is_loopback(hp->host));
  }
  t.kind = local ? TargetKind::Local : TargetKind::Remote;
  if (!local) t.remote = std::move(*hp);
  return t;
}

}  // namespace ferry::daemon
