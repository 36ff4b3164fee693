// The sd_notify datagram protocol (systemd's "Type=notify"), implemented
// here so ferryd needs no libsystemd: one AF_UNIX datagram of
// newline-separated KEY=VALUE lines to the socket named by $NOTIFY_SOCKET
// (a path, or an abstract name when it starts with '@').
// Control thread only; every call is a no-op when $NOTIFY_SOCKET is unset.
#pragma once

#include <string>
#include <string_view>

#include "ferry/error.h"

namespace ferry::daemon {

class Notifier {
 public:
  // Reads $NOTIFY_SOCKET once. An unusable value (too long, not '/' or '@')
  // disables notification and is reported by error() (ok otherwise).
  Notifier();
  // For tests and callers that want an explicit address.
  explicit Notifier(std::string_view socket_name);
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  bool enabled() const noexcept { return fd_ >= 0; }
  const Error& error() const noexcept { return error_; }

  // Sends `state` ("READY=1\nSTATUS=..."). Returns false when disabled or
  // the send failed (systemd gone: harmless, the daemon carries on).
  bool send(std::string_view state) const noexcept;

  bool ready(std::string_view status) const;      // READY=1 + STATUS=
  bool status(std::string_view status) const;     // STATUS=
  bool reloading(std::string_view status) const;  // RELOADING=1 + STATUS=
  bool stopping(std::string_view status) const;   // STOPPING=1 + STATUS=

 private:
  void open(std::string_view socket_name);

  int fd_ = -1;
  std::string name_;  // as given: '@' for abstract
  Error error_;
};

}  // namespace ferry::daemon
