#include "daemon/loop/control_link.h"

#include "daemon/session/client_session.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ferry::daemon {

namespace {

void ring_eventfd(int fd) noexcept {
  const std::uint64_t one = 1;
  // EAGAIN only when the counter is near overflow: it is readable anyway.
  [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof one);
}

}  // namespace

ControlLink::ControlLink() {
  // Both eventfds are ours alone: no client shares their flags.
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0 || event_fd_ < 0) {
    throw std::runtime_error(std::string("engine setup: ") + std::strerror(errno));  // start-up only
  }
  unsent_.reserve(64);
}

ControlLink::~ControlLink() {
  // Sessions never handed over (queue drained after the engine stopped).
  EngineCommand cmd;
  while (commands_.pop(cmd)) {
    if (cmd.kind == EngineCommand::Kind::Attach) delete cmd.session;
  }
  for (int fd : {wake_fd_, event_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

bool ControlLink::submit(const EngineCommand& cmd) noexcept {
  if (!commands_.push(cmd)) return false;
  ring_eventfd(wake_fd_);
  return true;
}

std::optional<std::uint32_t> ControlLink::pop_event() noexcept {
  std::uint32_t id = 0;
  if (events_.pop(id)) return id;
  return std::nullopt;
}

void ControlLink::wake() const noexcept { ring_eventfd(wake_fd_); }

void ControlLink::flush_events() noexcept {
  if (unsent_.empty()) return;
  std::size_t sent = 0;
  while (sent < unsent_.size() && events_.push(unsent_[sent])) ++sent;
  unsent_.erase(unsent_.begin(), unsent_.begin() + static_cast<std::ptrdiff_t>(sent));
  if (sent != 0) ring_eventfd(event_fd_);
}

void ControlLink::drain_wake() const noexcept {
  std::uint64_t v;
  [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &v, sizeof v);  // ours, non-blocking
}

}  // namespace ferry::daemon
