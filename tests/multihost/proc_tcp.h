// What the kernel says about a daemon's TCP sockets, independent of what
// the daemon reports: /proc/PID/net/tcp (the process's own network
// namespace) joined with the socket inodes in /proc/PID/fd. Used to see
// that a daemon listens, and to count the connections between two daemons.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ferry::mhtest {

struct TcpSocket {
  std::uint32_t local_ip = 0;  // as in /proc (network byte order read as a host integer)
  std::uint16_t local_port = 0;
  std::uint32_t remote_ip = 0;
  std::uint16_t remote_port = 0;
  int state = 0;  // 1 ESTABLISHED, 10 LISTEN
  unsigned long inode = 0;
};

inline constexpr int kTcpEstablished = 1;
inline constexpr int kTcpListen = 10;

// IPv4 sockets that `pid` holds open (empty when it is gone).
std::vector<TcpSocket> tcp_sockets_of(pid_t pid);

// Whether `pid` holds a listening socket on `port`.
bool listens_on(pid_t pid, std::uint16_t port);

// Established connections between the two processes (each counted once).
std::size_t connections_between(pid_t a, pid_t b);

}  // namespace ferry::mhtest
