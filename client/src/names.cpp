#include "client/src/names.h"

namespace ferry::client_detail {

namespace {

bool is_alnum(char c) noexcept { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

bool valid_host(std::string_view h) noexcept {
  if (h.empty()) return false;
  if (h.front() == '[') {  // IPv6 literal
    if (h.size() < 3 || h.back() != ']') return false;
    for (char c : h.substr(1, h.size() - 2)) {
      if (!(is_alnum(c) || c == ':' || c == '.' || c == '%')) return false;
    }
    return true;
  }
  for (char c : h) {
    if (!(is_alnum(c) || c == '.' || c == '-' || c == '_')) return false;
  }
  return true;
}

bool valid_port(std::string_view p) noexcept {
  if (p.empty() || p.size() > 5) return false;
  unsigned v = 0;
  for (char c : p) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  return v >= 1 && v <= 65535;
}

}  // namespace

bool valid_service_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!(is_alnum(c) || c == '.' || c == '_' || c == '-')) return false;
  }
  return true;
}

bool valid_target(std::string_view target) noexcept {
  if (target.empty() || target.size() > 256) return false;
  const auto slash = target.rfind('/');
  if (slash == std::string_view::npos) return valid_service_name(target);
  if (!valid_service_name(target.substr(slash + 1))) return false;
  std::string_view host = target.substr(0, slash);
  // A port follows the last ':' outside an IPv6 bracket.
  const auto close = host.rfind(']');
  const auto colon = host.rfind(':');
  if (colon != std::string_view::npos && (close == std::string_view::npos || colon > close)) {
    if (!valid_port(host.substr(colon + 1))) return false;
    host = host.substr(0, colon);
  }
  return valid_host(host);
}

}  // namespace ferry::client_detail
