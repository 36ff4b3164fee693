#include "daemon/loop/event_set.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ferry::daemon {

EventSet::EventSet() : fd_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (fd_ < 0) throw std::runtime_error(std::string("engine setup: epoll: ") + std::strerror(errno));  // start-up
}

EventSet::~EventSet() {
  if (fd_ >= 0) ::close(fd_);
}

bool EventSet::add(int fd, std::uint64_t tag, bool edge) noexcept {
  if (fd < 0) return true;  // nothing to watch (a transport without an fd)
  epoll_event ev{};
  ev.events = EPOLLIN | (edge ? EPOLLET : 0u);
  ev.data.u64 = tag;
  return ::epoll_ctl(fd_, EPOLL_CTL_ADD, fd, &ev) == 0;
}

void EventSet::remove(int fd) noexcept {
  if (fd >= 0) (void)::epoll_ctl(fd_, EPOLL_CTL_DEL, fd, nullptr);  // gone already: nothing to undo
}

}  // namespace ferry::daemon
