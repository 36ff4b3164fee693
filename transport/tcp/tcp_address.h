// Socket addresses for the tcp backend: numeric parsing (no name
// resolution on the transport) and the two tests the dialler and listener
// make of an address.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string_view>

namespace ferry::transport::tcp {

// Numeric IPv4 or IPv6 only: name resolution belongs to the caller's control
// path, not to a transport that must not block unboundedly.
// False when `host` is neither.
[[nodiscard]] bool parse_address(std::string_view host, std::uint16_t port, sockaddr_storage& ss, socklen_t& len);
// 0.0.0.0 or ::
[[nodiscard]] bool is_wildcard(const sockaddr_storage& ss) noexcept;
// 127.0.0.0/8 or ::1
[[nodiscard]] bool is_loopback(const sockaddr_storage& ss) noexcept;

}  // namespace ferry::transport::tcp
