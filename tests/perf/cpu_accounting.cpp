#include "cpu_accounting.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "daemon_cpu.h"

namespace ferry::bench {

namespace {

std::uint64_t timeval_us(const timeval& tv) {
  return static_cast<std::uint64_t>(tv.tv_sec) * 1000000u + static_cast<std::uint64_t>(tv.tv_usec);
}

// Sum over every thread: /proc/PID/schedstat alone is the main thread's.
std::optional<std::uint64_t> schedstat_us(pid_t pid) {
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(task_dir.c_str());
  if (!dir) return std::nullopt;
  std::uint64_t total_ns = 0;
  bool any = false;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(task_dir + "/" + e->d_name + "/schedstat");
    std::uint64_t on_cpu_ns = 0;
    if (in >> on_cpu_ns) {
      total_ns += on_cpu_ns;
      any = true;
    }
  }
  ::closedir(dir);
  if (!any) return std::nullopt;
  return total_ns / 1000u;
}

std::optional<std::uint64_t> stat_us(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // comm may hold spaces and parentheses: parse after the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  std::uint64_t utime = 0, stime = 0;
  // Fields 3.. after comm; utime is field 14, stime 15 (1-based).
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  const long ticks = sysconf(_SC_CLK_TCK);
  if (ticks <= 0) return std::nullopt;
  return (utime + stime) * 1000000u / static_cast<std::uint64_t>(ticks);
}

}  // namespace

std::uint64_t self_cpu_us() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return timeval_us(ru.ru_utime) + timeval_us(ru.ru_stime);
}

std::optional<std::uint64_t> process_cpu_us(pid_t pid) {
  if (auto v = schedstat_us(pid)) return v;
  return stat_us(pid);
}

void CpuMeter::add_daemon(const std::string& control_path) {
  if (control_path.empty()) return;
  if (std::find(controls_.begin(), controls_.end(), control_path) == controls_.end()) controls_.push_back(control_path);
}

void CpuMeter::begin() {
  daemon_begin_.clear();
  for (const auto& c : controls_) daemon_begin_.push_back(read_daemon_cpu_us(c));
  proc_begin_.clear();
  for (const auto pid : pids_) proc_begin_.push_back(process_cpu_us(pid));
  self_begin_ = self_cpu_us();
}

CpuReport CpuMeter::end() {
  CpuReport r;
  r.self_us = self_cpu_us() - self_begin_;
  for (std::size_t i = 0; i < pids_.size(); ++i) {
    const auto now = process_cpu_us(pids_[i]);
    if (now && proc_begin_[i] && *now >= *proc_begin_[i]) r.servers_us += *now - *proc_begin_[i];
  }
  r.daemon_included = !controls_.empty();
  r.daemon_involved = !controls_.empty();
  for (std::size_t i = 0; i < controls_.size(); ++i) {
    const auto now = read_daemon_cpu_us(controls_[i]);
    if (now && daemon_begin_[i] && *now >= *daemon_begin_[i]) {
      r.daemon_us += *now - *daemon_begin_[i];
    } else {
      r.daemon_included = false;
    }
  }
  return r;
}

}  // namespace ferry::bench
