// Face checks for service names and endpoint targets, done client side so a
// typo fails at once with BadRequest instead of a round trip (the daemon
// checks again: it trusts no client).
#pragma once

#include <string_view>

namespace ferry::client_detail {

// 1..64 bytes of [A-Za-z0-9._-] (shm/OPS.md, Serve).
bool valid_service_name(std::string_view name) noexcept;
// "SERVICE" or "HOST[:PORT]/SERVICE", at most 256 bytes; HOST is a name,
// an IPv4 address or a [bracketed] IPv6 address; PORT is 1..65535.
bool valid_target(std::string_view target) noexcept;

}  // namespace ferry::client_detail
