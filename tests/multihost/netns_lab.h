// A throw-away network of "hosts" on this machine: one network namespace
// per host, each with a veth ("fv0") whose other end sits on a bridge in a
// hub namespace. Nothing is created in the machine's own namespace, and the
// addresses come from the benchmarking range 198.18.0.0/15 (198.18.2.0/24),
// so no packet can leave the machine. Before anything is sent the lab
// checks that `ip -n NS route get PEER` names NS's own veth.
//
// Clean-up runs on every exit path: the destructor (normal end, failed
// REQUIRE), a handler for SIGTERM/SIGINT/SIGHUP/SIGABRT/SIGSEGV (meson's
// timeout, a crash), and a sweep at start-up of labs whose test process no
// longer exists (a SIGKILL leaves nothing else behind).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "ferry/error.h"

namespace ferry::mhtest {

class NetnsLab {
 public:
  // Creates `hosts` namespaces (throws std::runtime_error, having removed
  // whatever it created, when a step or the route check fails).
  explicit NetnsLab(std::size_t hosts);
  ~NetnsLab();
  NetnsLab(const NetnsLab&) = delete;
  NetnsLab& operator=(const NetnsLab&) = delete;

  std::size_t hosts() const { return names_.size(); }
  const std::string& ns(std::size_t i) const { return names_[i]; }
  // 198.18.2.(i+1)
  std::string address(std::size_t i) const;
  // An address on the lab's subnet that no namespace holds (for
  // PeerUnreachable); its route is checked like the others.
  static std::string vacant_address() { return "198.18.2.250"; }

  // Whether the lab can be built here: NotSupported, saying why, when not
  // (not root, no `ip netns`).
  [[nodiscard]] static Error available();
  // Moves the calling process into namespace `ns` (setns). False on failure.
  static bool enter(const std::string& ns);
  // Registers a process to SIGKILL in the signal handler before the
  // namespaces go (a daemon inside one keeps it alive otherwise).
  static void track_pid(pid_t pid);
  static void untrack_pid(pid_t pid);

 private:
  void build();
  void check_routes() const;
  void destroy() noexcept;

  std::string hub_;
  std::vector<std::string> names_;
};

// Runs `ip ARGS...` (no shell); returns its exit code, output in *out.
int run_ip(const std::vector<std::string>& args, std::string* out = nullptr);

}  // namespace ferry::mhtest
