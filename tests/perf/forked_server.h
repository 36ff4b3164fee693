// A server process that ferry-bench forks for a scenario. The child tells
// the parent it is ready (or why it failed) with one line on a pipe, so
// the parent waits on a condition with a deadline, never a sleep.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

#include "ferry/error.h"

namespace ferry::bench {

// Given to the child body: report readiness once, with optional info
// (e.g. the port it bound), or a failure.
class ReadyNotifier {
 public:
  ReadyNotifier(int fd, int stop_fd) : fd_(fd), stop_fd_(stop_fd) {}
  void ready(const std::string& info = {});
  void failed(const std::string& why);
  // Becomes readable (EOF) when the parent asks the server to stop; for
  // servers that have no connection whose EOF would tell them.
  int stop_fd() const { return stop_fd_; }

 private:
  int fd_;
  int stop_fd_;
};

class ForkedServer {
 public:
  ForkedServer() = default;
  ~ForkedServer();  // kills and reaps a child that is still running
  ForkedServer(const ForkedServer&) = delete;
  ForkedServer& operator=(const ForkedServer&) = delete;

  // Forks; the child runs body and _exits with its return value. Set-up
  // only (std::function is fine here).
  Error start(const std::function<int(ReadyNotifier&)>& body);
  // Waits for the child's ready line; *info (when given) gets what it
  // passed. Timeout past the deadline; PeerUnreachable when the child
  // reported a failure or exited first.
  Error wait_ready(std::chrono::milliseconds timeout, std::string* info);
  // Makes the child's stop_fd() readable.
  void request_stop();
  // Asks the child to stop, then waits up to `grace` for the child to exit on its own (it should once
  // its client hung up), then SIGTERM, then SIGKILL. Returns its exit code,
  // or 128+signal.
  int stop(std::chrono::milliseconds grace);

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int ready_fd_ = -1;
  int stop_write_fd_ = -1;
};

}  // namespace ferry::bench
