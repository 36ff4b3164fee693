// CPU cost of a measured phase: the measuring process, the server
// processes it forked, and the daemon(s) serving it. Each is read before
// and after the phase so set-up and warm-up are not charged:
//   - self: getrusage(RUSAGE_SELF) (all threads, microsecond resolution);
//   - forked servers, while alive: /proc/PID/task/*/schedstat (ns on-CPU,
//     user+sys), falling back to utime+stime from /proc/PID/stat (ticks);
//   - daemons: cpu_user_us + cpu_sys_us from the control socket's status.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ferry::bench {

// User+system CPU of this process so far, in microseconds.
std::uint64_t self_cpu_us();
// On-CPU time of a live process so far, in microseconds; nullopt when gone.
std::optional<std::uint64_t> process_cpu_us(pid_t pid);

struct CpuReport {
  std::uint64_t self_us = 0;
  std::uint64_t servers_us = 0;
  std::uint64_t daemon_us = 0;
  bool daemon_included = false;  // every daemon answered before and after
  bool daemon_involved = false;  // the scenario goes through a daemon at all
  std::uint64_t total_us() const { return self_us + servers_us + daemon_us; }
};

class CpuMeter {
 public:
  void add_process(pid_t pid) { pids_.push_back(pid); }
  // Control socket of a daemon to charge (duplicates are ignored).
  void add_daemon(const std::string& control_path);

  void begin();
  CpuReport end();

 private:
  std::vector<pid_t> pids_;
  std::vector<std::string> controls_;
  std::uint64_t self_begin_ = 0;
  std::vector<std::optional<std::uint64_t>> proc_begin_;
  std::vector<std::optional<std::uint64_t>> daemon_begin_;
};

}  // namespace ferry::bench
