#include "tcp_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ferry::bench {

namespace {

bool split_host_port(const std::string& text, std::string* host, std::string* port) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) return false;
  *host = text.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  *port = text.substr(colon + 1);
  return true;
}

// A socket call's failure, from errno: a peer that refuses or cannot be
// reached is PeerUnreachable, EACCES/EPERM PermissionDenied, anything else
// BadRequest (an address this host cannot use).
Error socket_error(const std::string& what) {
  const int e = errno;
  Status status = Status::BadRequest;
  if (e == EACCES || e == EPERM) {
    status = Status::PermissionDenied;
  } else if (e == ECONNREFUSED || e == ETIMEDOUT || e == EHOSTUNREACH || e == ENETUNREACH) {
    status = Status::PeerUnreachable;
  }
  return Error(status, what + ": " + std::strerror(e));
}

// *res gets the addresses of host_port; free them with freeaddrinfo().
Error resolve(const std::string& host_port, bool passive, addrinfo** res) {
  std::string host, port;
  if (!split_host_port(host_port, &host, &port))
    return Error::bad_request("expected HOST:PORT, got '" + host_port + "'");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, res);
  if (rc != 0) return Error::bad_request(host_port + ": " + ::gai_strerror(rc));
  return {};
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string describe(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = {};
  unsigned port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
  ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
  port = ntohs(in6->sin6_port);
  return "[" + std::string(host) + "]:" + std::to_string(port);
}

}  // namespace

Error tcp_listen(const std::string& host_port, int* fd, std::string* bound) {
  *fd = -1;
  addrinfo* res = nullptr;
  if (Error e = resolve(host_port, true, &res); e.failed()) return e;
  Error error;  // the last address's failure
  int s = -1;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    s = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (s < 0) {
      error = socket_error(host_port);
      continue;
    }
    const int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(s, 64) == 0) break;
    error = socket_error(host_port);
    ::close(s);
    s = -1;
  }
  ::freeaddrinfo(res);
  if (s < 0) return error;
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&ss), &len);
  *bound = describe(ss);
  *fd = s;
  return {};
}

Error tcp_connect(const std::string& host_port, int* fd) {
  *fd = -1;
  addrinfo* res = nullptr;
  if (Error e = resolve(host_port, false, &res); e.failed()) return e;
  Error error;  // the last address's failure
  int s = -1;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    s = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (s < 0) {
      error = socket_error("socket for " + host_port);
      continue;
    }
    if (::connect(s, ai->ai_addr, ai->ai_addrlen) == 0) break;
    error = socket_error("connect " + host_port);
    ::close(s);
    s = -1;
  }
  ::freeaddrinfo(res);
  if (s < 0) return error;
  set_nodelay(s);
  *fd = s;
  return {};
}

int tcp_accept(int listen_fd) {
  int fd;
  do {
    fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd >= 0) set_nodelay(fd);
  return fd;
}

}  // namespace ferry::bench
