// Keeps systemd's STATUS= line current: every second it renders the
// daemon's status as "serving N clients, M peers[, draining]" and sends it
// when it changed (so `systemctl status ferryd` is never stale by more than
// a second and the manager is not spammed). Control (asio) thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <string>

#include "base/json.h"
#include "daemon/systemd/notify.h"

namespace ferry::daemon {

// "serving 3 clients, 1 peer" from a status result (control_protocol.h's
// shape: "clients" a count, "peers" an array, "draining" a bool).
std::string service_status_line(const json::Value& status);

class StatusReporter {
 public:
  using StatusFn = std::function<json::Value()>;
  StatusReporter(boost::asio::io_context& io, const Notifier& notifier, StatusFn status);

  // The current line (also what READY=1 carries).
  std::string line() const { return service_status_line(status_()); }
  void start();
  void stop();
  // Sends the current line now if it differs from the last one sent.
  void refresh();

 private:
  void arm();

  boost::asio::steady_timer timer_;
  const Notifier& notifier_;
  StatusFn status_;
  std::string last_;
  bool stopped_ = false;
};

}  // namespace ferry::daemon
