// Integration-test harness: a real ferryd from the build tree in a fresh
// runtime dir, helper processes forked into roles, pipes to sequence them,
// and deadlines everywhere so no test can hang. Paths of the binaries come
// from the environment (FERRYD, FERRYCTL), set by meson.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ferry/client.h"

namespace ferry::itest {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A running ferryd; killed and reaped (and its dir removed) on destruction.
class Daemon {
 public:
  Daemon();  // starts it and waits (deadline) for both sockets; throws on failure
  explicit Daemon(const std::vector<std::string>& extra_args);  // the same, with more ferryd flags
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  const std::string& dir() const { return dir_; }
  std::string socket() const { return dir_ + "/ferryd.sock"; }
  std::string control() const { return dir_ + "/control.sock"; }
  pid_t pid() const { return pid_; }
  bool alive();      // not exited yet
  void kill_hard();  // SIGKILL + reap
  // kill_hard(), then a new ferryd in the same directory with the same
  // flags (the same socket paths), up when it returns: a restart under its clients.
  void restart();
  // `ferryctl --control DIR/control.sock status --json` -> "clients", or -1.
  long clients() const;
  // The same status -> the first number keyed `key` (e.g. a counter: "calls"), or -1.
  long status_number(const std::string& key) const;
  // The same status -> engines[engine][key] (an engine's number: "clients",
  // "cross_engine_in", ...), or -1.
  long engine_number(std::uint32_t engine, const std::string& key) const;
  // Polls clients() until it equals `want` or the deadline passes.
  bool wait_clients(long want, std::chrono::milliseconds within) const;
  // Polls until 0 <= clients() <= most.
  bool wait_clients_at_most(long most, std::chrono::milliseconds within) const;

 private:
  void launch();

  std::vector<std::string> args_;
  std::string dir_;
  pid_t pid_ = -1;
};

// The value of environment variable `name` (the paths meson test passes:
// FERRYD, FERRYCTL, ...); throws when it is unset or empty.
std::string required_env(const char* name);
// Whether `path` exists (stat).
bool path_exists(const std::string& path);

// Forks; the child runs `body` and _exit()s with its return value (an
// uncaught exception exits 99). Returns the child's pid.
pid_t spawn(const std::function<int()>& body);
// spawn() with FERRY_ENGINE=engine in the child: a client it attaches
// (without naming an engine) is placed on that engine of a ferryd.
pid_t spawn_on_engine(std::uint32_t engine, const std::function<int()>& body);
// Waits for pid up to `within`; SIGKILLs it past that. Returns the exit code,
// 128+signal when killed by a signal, or -1 on timeout.
int reap(pid_t pid, std::chrono::milliseconds within);

// SIGSTOPs pid and waits (up to `within`) until every one of its threads
// has stopped (state T in /proc/PID/task/*/stat): kill() returns before a
// multi-threaded process has stopped, and its other threads (a ferryd's
// engines) may run on for a while. False when it did not stop in time.
[[nodiscard]] bool stop_process(pid_t pid, std::chrono::milliseconds within);

// A one-way pipe used to sequence processes: signal() writes one byte,
// wait() reads one with a deadline. Both ends stay open in both processes
// (close_unused is not needed for byte-counting use).
class Gate {
 public:
  Gate();
  ~Gate();
  void signal() const;
  bool wait(std::chrono::milliseconds within) const;  // true when a byte came
  bool ready() const;                                 // a byte is waiting (non-blocking peek)

 private:
  int fds_[2] = {-1, -1};
};

// Attaches, retrying while the daemon is still coming up. Null on failure.
std::unique_ptr<Client> attach_retry(const std::string& socket, const std::string& name,
                                     std::chrono::milliseconds within = 3s);

// Child-side failure report: prints to stderr and returns `code`, the
// child's exit status. A code of 0 or 77 (meson's "skipped", should the
// status ever reach meson) is returned as 1, so a failure never reads as a
// pass or a skip.
int fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Opens `target` on `c`, retrying ServiceNotFound until the deadline (the
// server process may not have served it yet).
Result<EndpointId> open_retry(Client& c, const std::string& target, std::chrono::milliseconds within = 5s);

// One call of `len` bytes from `req` into `resp`, waited for: its OpDone;
// a refused submission's status; Timeout when no OpDone of `tag` came
// within `within` (other completions are dropped).
Completion call_once(Client& c, EndpointId ep, const Buffer& req, std::uint32_t len, const Buffer& resp,
                     std::uint64_t tag, std::chrono::milliseconds within = 5s);

}  // namespace ferry::itest
