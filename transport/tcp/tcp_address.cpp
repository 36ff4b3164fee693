#include "transport/tcp/tcp_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <string>

namespace ferry::transport::tcp {

bool parse_address(std::string_view host, std::uint16_t port, sockaddr_storage& ss, socklen_t& len) {
  const std::string h(host);
  std::memset(&ss, 0, sizeof ss);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof(sockaddr_in);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

bool is_wildcard(const sockaddr_storage& ss) noexcept {
  if (ss.ss_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr == htonl(INADDR_ANY);
  return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr);
}

bool is_loopback(const sockaddr_storage& ss) noexcept {
  if (ss.ss_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
  }
  return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr);
}

}  // namespace ferry::transport::tcp
