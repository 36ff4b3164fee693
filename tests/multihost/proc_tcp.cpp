#include "tests/multihost/proc_tcp.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>

namespace ferry::mhtest {

namespace {

std::set<unsigned long> socket_inodes(pid_t pid) {
  std::set<unsigned long> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    char target[128];
    const std::string link = dir + "/" + e->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    unsigned long ino = 0;
    if (std::sscanf(target, "socket:[%lu]", &ino) == 1) out.insert(ino);
  }
  ::closedir(d);
  return out;
}

}  // namespace

std::vector<TcpSocket> tcp_sockets_of(pid_t pid) {
  std::vector<TcpSocket> out;
  const auto inodes = socket_inodes(pid);
  if (inodes.empty()) return out;
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/net/tcp").c_str(), "r");
  if (f == nullptr) return out;
  char line[512];
  if (std::fgets(line, sizeof line, f) == nullptr) {  // header
    std::fclose(f);
    return out;
  }
  while (std::fgets(line, sizeof line, f) != nullptr) {
    TcpSocket s;
    unsigned lport = 0, rport = 0, state = 0, uid = 0;
    unsigned long timeout = 0;
    // "  0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0 0 12345 ..."
    if (std::sscanf(line, " %*d: %8X:%4X %8X:%4X %2X %*X:%*X %*X:%*X %*X %u %lu %lu", &s.local_ip, &lport, &s.remote_ip,
                    &rport, &state, &uid, &timeout, &s.inode) != 8)
      continue;
    if (inodes.count(s.inode) == 0) continue;
    s.local_port = static_cast<std::uint16_t>(lport);
    s.remote_port = static_cast<std::uint16_t>(rport);
    s.state = static_cast<int>(state);
    out.push_back(s);
  }
  std::fclose(f);
  return out;
}

bool listens_on(pid_t pid, std::uint16_t port) {
  for (const auto& s : tcp_sockets_of(pid))
    if (s.state == kTcpListen && s.local_port == port) return true;
  return false;
}

std::size_t connections_between(pid_t a, pid_t b) {
  const auto sa = tcp_sockets_of(a);
  const auto sb = tcp_sockets_of(b);
  std::size_t n = 0;
  for (const auto& x : sa) {
    if (x.state != kTcpEstablished) continue;
    for (const auto& y : sb) {
      if (y.state == kTcpEstablished && x.local_ip == y.remote_ip && x.local_port == y.remote_port &&
          x.remote_ip == y.local_ip && x.remote_port == y.local_port) {
        ++n;
        break;
      }
    }
  }
  return n;
}

}  // namespace ferry::mhtest
