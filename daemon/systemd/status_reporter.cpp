#include "daemon/systemd/status_reporter.h"

#include <chrono>

namespace ferry::daemon {

namespace {

std::string plural(std::uint64_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

}  // namespace

std::string service_status_line(const json::Value& status) {
  std::uint64_t clients = 0, peers = 0;
  bool draining = false;
  if (const json::Value* v = status.find("clients")) clients = v->as_uint().value_or(0);
  if (const json::Value* v = status.find("peers")) {
    if (const json::Array* a = v->as_array()) peers = a->size();
  }
  if (const json::Value* v = status.find("draining")) draining = v->as_bool().value_or(false);
  std::string line = "serving " + plural(clients, "client") + ", " + plural(peers, "peer");
  if (draining) line += ", draining (new attaches refused)";
  return line;
}

StatusReporter::StatusReporter(boost::asio::io_context& io, const Notifier& notifier, StatusFn status)
    : timer_(io), notifier_(notifier), status_(std::move(status)) {}

void StatusReporter::start() {
  if (!notifier_.enabled()) return;  // nobody listens: no timer either
  last_ = line();
  arm();
}

void StatusReporter::stop() {
  stopped_ = true;
  timer_.cancel();
}

void StatusReporter::refresh() {
  if (stopped_ || !notifier_.enabled()) return;
  std::string now = line();
  if (now == last_) return;
  notifier_.status(now);
  last_ = std::move(now);
}

void StatusReporter::arm() {
  timer_.expires_after(std::chrono::seconds(1));
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    refresh();
    arm();
  });
}

}  // namespace ferry::daemon
