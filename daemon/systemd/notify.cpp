#include "daemon/systemd/notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace ferry::daemon {

namespace {

// Builds the address; abstract names have a leading NUL and no terminator,
// so the length passed to sendto is exact rather than sizeof(sockaddr_un).
bool make_addr(const std::string& name, sockaddr_un* addr, socklen_t* len) {
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  if (name.size() < 2 || name.size() >= sizeof(addr->sun_path)) return false;
  if (name[0] != '/' && name[0] != '@') return false;
  std::memcpy(addr->sun_path, name.data(), name.size());
  if (name[0] == '@') addr->sun_path[0] = '\0';
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + (name[0] == '/' ? 1 : 0));
  return true;
}

std::string with_status(std::string_view head, std::string_view status) {
  std::string s(head);
  s += "\nSTATUS=";
  // A newline inside STATUS would start a new (bogus) assignment.
  for (char c : status) s.push_back(c == '\n' ? ' ' : c);
  return s;
}

}  // namespace

Notifier::Notifier() {
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env != nullptr && *env != '\0') open(env);
}

Notifier::Notifier(std::string_view socket_name) { open(socket_name); }

Notifier::~Notifier() {
  if (fd_ >= 0) ::close(fd_);
}

void Notifier::open(std::string_view socket_name) {
  name_ = std::string(socket_name);
  sockaddr_un addr;
  socklen_t len = 0;
  if (!make_addr(name_, &addr, &len)) {
    error_ = Error::bad_request("NOTIFY_SOCKET '" + name_ + "' is not an absolute path or @abstract name");
    return;
  }
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) error_ = Error(Status::NoMemory, std::string("NOTIFY_SOCKET: socket: ") + std::strerror(errno));
}

bool Notifier::send(std::string_view state) const noexcept {
  if (fd_ < 0) return false;
  sockaddr_un addr;
  socklen_t len = 0;
  if (!make_addr(name_, &addr, &len)) return false;
  // MSG_NOSIGNAL: a vanished manager must not kill us with SIGPIPE.
  ssize_t n = ::sendto(fd_, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr), len);
  return n == static_cast<ssize_t>(state.size());
}

bool Notifier::ready(std::string_view status) const { return send(with_status("READY=1", status)); }
bool Notifier::status(std::string_view status) const { return send(with_status("", status).substr(1)); }
bool Notifier::reloading(std::string_view status) const {
  // MONOTONIC_USEC lets systemd >= 253 (Type=notify-reload) match the
  // reload to its request; older managers ignore the field.
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const unsigned long long usec = static_cast<unsigned long long>(ts.tv_sec) * 1000000ull + ts.tv_nsec / 1000;
  return send(with_status("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec), status));
}
bool Notifier::stopping(std::string_view status) const { return send(with_status("STOPPING=1", status)); }

}  // namespace ferry::daemon
