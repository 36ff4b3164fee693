// Open targets: "SERVICE" (this daemon) or "HOST[:PORT]/SERVICE". A HOST:PORT
// naming this daemon's own --listen address is local too. Also parses the
// --listen value itself (HOST:PORT, IPv6 hosts in brackets).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ferry::daemon {

struct HostPort {
  std::string host;        // brackets stripped for IPv6
  std::uint16_t port = 0;  // 0: not given
};

// "HOST", "HOST:PORT", "[V6]", "[V6]:PORT". nullopt when malformed (empty
// host, bad port, port 0, stray brackets or colons).
[[nodiscard]] std::optional<HostPort> parse_host_port(std::string_view text) noexcept;

enum class TargetKind : std::uint8_t { Invalid, Local, Remote };
std::string_view to_string(TargetKind k) noexcept;

struct Target {
  TargetKind kind = TargetKind::Invalid;
  std::string_view service;  // points into the parsed text
  HostPort remote;           // Remote only
};

// `own_listen` is this daemon's --listen (may be empty). A target host:port
// equal to it (or loopback/localhost with the same port when listening on a
// wildcard address) is Local. Without a port a host never matches: the
// bootstrap port has no default.
// `own_ports`: the other ports this daemon listens on (one per engine).
Target parse_target(std::string_view text, const std::optional<HostPort>& own_listen,
                    std::span<const std::uint16_t> own_ports = {}) noexcept;

}  // namespace ferry::daemon
