#include "tests/multihost/netns_lab.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace ferry::mhtest {

namespace {

// The signal handler may only touch plain memory: fixed arrays, no heap.
constexpr int kMaxNs = 64;  // 32-host labs (test_mesh32) plus their hub
constexpr int kMaxPids = 256;
constexpr int kNameBytes = 64;
char g_ns[kMaxNs][kNameBytes];
volatile sig_atomic_t g_ns_used[kMaxNs];
volatile pid_t g_pids[kMaxPids];
char g_ip_path[64];
std::atomic<int> g_lab_seq{0};

const char* ip_path() {
  if (g_ip_path[0] == '\0') {
    for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (::access(p, X_OK) == 0) {
        std::snprintf(g_ip_path, sizeof g_ip_path, "%s", p);
        break;
      }
    }
  }
  return g_ip_path[0] ? g_ip_path : nullptr;
}

// Async-signal-safe: fork + execv + waitpid only.
void delete_ns_raw(const char* name) {
  const char* ip = g_ip_path;
  if (ip[0] == '\0') return;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
    }
    char* argv[] = {const_cast<char*>("ip"), const_cast<char*>("netns"), const_cast<char*>("del"),
                    const_cast<char*>(name), nullptr};
    ::execv(ip, argv);
    ::_exit(127);
  }
  if (pid > 0) {
    int st;
    ::waitpid(pid, &st, 0);
  }
}

void on_fatal_signal(int sig) {
  for (int i = 0; i < kMaxPids; ++i)
    if (g_pids[i] > 0) ::kill(g_pids[i], SIGKILL);
  for (int i = 0; i < kMaxNs; ++i)
    if (g_ns_used[i]) delete_ns_raw(g_ns[i]);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void install_handlers() {
  static bool done = false;
  if (done) return;
  done = true;
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGABRT, SIGSEGV, SIGBUS}) ::sigaction(sig, &sa, nullptr);
}

void register_ns(const std::string& name) {
  for (int i = 0; i < kMaxNs; ++i) {
    if (!g_ns_used[i]) {
      std::snprintf(g_ns[i], kNameBytes, "%s", name.c_str());
      g_ns_used[i] = 1;
      return;
    }
  }
  throw std::runtime_error("too many namespaces for the clean-up registry");
}

void unregister_ns(const std::string& name) {
  for (int i = 0; i < kMaxNs; ++i)
    if (g_ns_used[i] && name == g_ns[i]) g_ns_used[i] = 0;
}

// Namespaces named fmh<pid>-... whose test process is gone (it was
// SIGKILLed, so nothing ran its clean-up).
void sweep_stale() {
  DIR* d = ::opendir("/run/netns");
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, "fmh", 3) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(e->d_name + 3, &end, 10);
    if (pid <= 0 || end == nullptr || *end != '-') continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.emplace_back(e->d_name);
  }
  ::closedir(d);
  for (const auto& n : stale) {
    std::fprintf(stderr, "netns lab: removing stale namespace %s\n", n.c_str());
    run_ip({"netns", "del", n});
  }
}

}  // namespace

int run_ip(const std::vector<std::string>& args, std::string* out) {
  const char* ip = ip_path();
  if (ip == nullptr) return 127;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return 126;
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>("ip"));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::execv(ip, argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string text;
  char buf[1024];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (out) *out = text;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

Error NetnsLab::available() {
  if (::geteuid() != 0) return Error(Status::NotSupported, "not root: network namespaces need CAP_SYS_ADMIN");
  if (ip_path() == nullptr) return Error(Status::NotSupported, "iproute2 `ip` not found");
  const std::string probe = "fmh" + std::to_string(::getpid()) + "-probe";
  std::string out;
  if (run_ip({"netns", "add", probe}, &out) != 0) return Error(Status::NotSupported, "`ip netns add` failed: " + out);
  run_ip({"netns", "del", probe});
  return {};
}

bool NetnsLab::enter(const std::string& ns) {
  const int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

void NetnsLab::track_pid(pid_t pid) {
  for (int i = 0; i < kMaxPids; ++i) {
    if (g_pids[i] <= 0) {
      g_pids[i] = pid;
      return;
    }
  }
}

void NetnsLab::untrack_pid(pid_t pid) {
  for (int i = 0; i < kMaxPids; ++i)
    if (g_pids[i] == pid) g_pids[i] = 0;
}

std::string NetnsLab::address(std::size_t i) const { return "198.18.2." + std::to_string(i + 1); }

NetnsLab::NetnsLab(std::size_t hosts) {
  if (hosts == 0 || hosts > 200) throw std::invalid_argument("netns lab: 1..200 hosts");
  if (ip_path() == nullptr) throw std::runtime_error("netns lab: `ip` not found");
  install_handlers();
  sweep_stale();
  const std::string prefix = "fmh" + std::to_string(::getpid()) + "-" + std::to_string(g_lab_seq++) + "-";
  hub_ = prefix + "hub";
  for (std::size_t i = 0; i < hosts; ++i) names_.push_back(prefix + "h" + std::to_string(i));
  try {
    build();
    check_routes();
  } catch (...) {
    destroy();
    throw;
  }
}

NetnsLab::~NetnsLab() { destroy(); }

void NetnsLab::build() {
  auto must = [](const std::vector<std::string>& args) {
    std::string out;
    if (run_ip(args, &out) != 0) {
      std::string cmd = "ip";
      for (const auto& a : args) cmd += " " + a;
      throw std::runtime_error("netns lab: `" + cmd + "` failed: " + out);
    }
  };
  register_ns(hub_);  // registered before creation: the handler tolerates a missing one
  must({"netns", "add", hub_});
  must({"-n", hub_, "link", "set", "lo", "up"});
  must({"-n", hub_, "link", "add", "br0", "type", "bridge"});
  must({"-n", hub_, "link", "set", "br0", "up"});
  for (std::size_t i = 0; i < names_.size(); ++i) {
    const std::string& ns = names_[i];
    const std::string port = "p" + std::to_string(i);
    register_ns(ns);
    must({"netns", "add", ns});
    must({"-n", ns, "link", "set", "lo", "up"});
    must({"-n", hub_, "link", "add", port, "type", "veth", "peer", "name", "fv0", "netns", ns});
    must({"-n", hub_, "link", "set", port, "master", "br0"});
    must({"-n", hub_, "link", "set", port, "up"});
    must({"-n", ns, "addr", "add", address(i) + "/24", "dev", "fv0"});
    must({"-n", ns, "link", "set", "fv0", "up"});
  }
}

void NetnsLab::check_routes() const {
  // The machine's own namespace must not cover the lab's range with
  // anything but its default route (the lab never uses it, but an address
  // that a real route covers is not a test address).
  std::string out;
  if (run_ip({"-o", "route", "show", "match", address(0)}, &out) != 0)
    throw std::runtime_error("netns lab: ip route show failed: " + out);
  std::size_t pos = 0;
  while (pos < out.size()) {
    const std::size_t nl = out.find('\n', pos);
    const std::string line = out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? out.size() : nl + 1;
    if (!line.empty() && line.rfind("default", 0) != 0)
      throw std::runtime_error("netns lab: a route of this machine covers " + address(0) + ": " + line);
  }
  std::vector<std::string> peers;
  for (std::size_t j = 0; j < names_.size(); ++j) peers.push_back(address(j));
  peers.push_back(vacant_address());
  for (std::size_t i = 0; i < names_.size(); ++i) {
    for (std::size_t j = 0; j < peers.size(); ++j) {
      if (j == i) continue;
      if (run_ip({"-n", names_[i], "route", "get", peers[j]}, &out) != 0 || out.find(" dev fv0 ") == std::string::npos)
        throw std::runtime_error("netns lab: in " + names_[i] + " `ip route get " + peers[j] +
                                 "` does not name the namespace's veth fv0: " + out);
    }
  }
}

void NetnsLab::destroy() noexcept {
  for (const auto& n : names_) {
    run_ip({"netns", "del", n});
    unregister_ns(n);
  }
  if (!hub_.empty()) {
    run_ip({"netns", "del", hub_});
    unregister_ns(hub_);
  }
  names_.clear();
  hub_.clear();
}

}  // namespace ferry::mhtest
