#include "tests/multihost/cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/integration/harness.h"
#include "tests/multihost/proc_tcp.h"

namespace ferry::mhtest {

using namespace std::chrono_literals;
using itest::Clock;

namespace {

constexpr std::uint16_t kNetnsPort = 7400;  // each namespace has its own port space
constexpr int kLoopbackAttempts = 5;        // a port taken between pick and bind: try another

}  // namespace

std::string_view to_string(NetMode m) noexcept {
  switch (m) {
    case NetMode::Loopback: return "loopback";
    case NetMode::Netns: return "netns";
  }
  return "unknown";
}

NetMode net_mode_from_env() {
  const char* v = std::getenv("FERRY_MH_NET");
  if (v == nullptr || std::string_view(v) != "netns") return NetMode::Loopback;
  if (const Error why = NetnsLab::available(); why.failed()) {
    std::printf("SKIP: netns mode needs network namespaces: %s\n", why.message().c_str());
    std::fflush(stdout);
    std::_Exit(77);
  }
  return NetMode::Netns;
}

std::uint16_t pick_free_port() {
  constexpr std::uint16_t kPortsPerDaemon = 4;
  static std::mt19937 rng(static_cast<unsigned>(::getpid()) ^
                          static_cast<unsigned>(Clock::now().time_since_epoch().count()));
  static std::set<std::uint16_t> handed_out;  // never the same port twice in one process
  std::uniform_int_distribution<int> dist(20000, 32000);
  for (int tries = 0; tries < 200; ++tries) {
    const auto port = static_cast<std::uint16_t>(dist(rng));
    // A ferryd with several engines listens on PORT+i for engine i: the
    // next few ports must be free too (and are never handed out again).
    bool ok = true;
    for (std::uint16_t k = 0; k < kPortsPerDaemon && ok; ++k) {
      const auto p = static_cast<std::uint16_t>(port + k);
      if (handed_out.count(p)) {
        ok = false;
        break;
      }
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        ok = false;
        break;
      }
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(p);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      ::close(fd);
    }
    if (ok) {
      for (std::uint16_t k = 0; k < kPortsPerDaemon; ++k) handed_out.insert(static_cast<std::uint16_t>(port + k));
      return port;
    }
  }
  throw std::runtime_error("no free port found in 20000..32000");
}

Cluster::Cluster(std::size_t count, NetMode mode, DaemonFlags flags) : mode_(mode), flags_(std::move(flags)) {
  if (mode_ == NetMode::Netns) lab_ = std::make_unique<NetnsLab>(count);  // routes checked before any traffic
  nodes_.resize(count);
  try {
    for (std::size_t i = 0; i < count; ++i) start(i);
  } catch (...) {
    for (std::size_t i = 0; i < nodes_.size(); ++i) kill_hard(i);
    for (const auto& n : nodes_)
      if (!n.dir.empty()) std::filesystem::remove_all(n.dir);
    throw;
  }
}

Cluster::~Cluster() {
  // FERRY_MH_LOGS=1: print every daemon's log tail (debugging a failure).
  if (const char* v = std::getenv("FERRY_MH_LOGS"); v && *v == '1')
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      std::fprintf(stderr, "--- ferryd %zu (%s) log ---\n%s\n", i, nodes_[i].listen().c_str(),
                   log_tail(i, 6000).c_str());
  for (auto& n : nodes_) {
    if (n.pid > 0) {
      ::kill(n.pid, SIGTERM);
      if (itest::reap(n.pid, 3s) < 0) std::fprintf(stderr, "ferryd %s ignored SIGTERM; killed\n", n.listen().c_str());
      NetnsLab::untrack_pid(n.pid);
      n.pid = -1;
    }
    std::error_code ec;
    if (!n.dir.empty()) std::filesystem::remove_all(n.dir, ec);
  }
  // lab_ (the namespaces) goes after the daemons that lived in it.
}

void Cluster::start(std::size_t i) {
  Node& n = nodes_[i];
  char tmpl[] = "/tmp/ferry-mh-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  n.dir = tmpl;
  if (mode_ == NetMode::Netns) {
    n.ns = lab_->ns(i);
    n.host = lab_->address(i);
    n.port = kNetnsPort;
  } else {
    n.host = i < flags_.hosts.size() ? flags_.hosts[i] : "127.0.0.1";
  }
  Error why;
  const int attempts = mode_ == NetMode::Loopback ? kLoopbackAttempts : 1;
  for (int a = 0; a < attempts; ++a) {
    if (mode_ == NetMode::Loopback) n.port = pick_free_port();
    why = try_start(i);
    if (why.ok()) return;
  }
  throw std::runtime_error("ferryd " + std::to_string(i) + " (" + n.listen() + ") did not come up: " + why.message() +
                           "\n--- log ---\n" + log_tail(i));
}

void Cluster::restart(std::size_t i) {
  kill_hard(i);
  Node& n = nodes_.at(i);
  std::error_code ec;
  if (!n.dir.empty()) std::filesystem::remove_all(n.dir, ec);
  char tmpl[] = "/tmp/ferry-mh-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  n.dir = tmpl;
  if (const Error why = try_start(i); why.failed())
    throw std::runtime_error("ferryd " + std::to_string(i) + " (" + n.listen() + ") did not restart: " + why.message() +
                             "\n--- log ---\n" + log_tail(i));
}

Error Cluster::try_start(std::size_t i) {
  Node& n = nodes_[i];
  const std::string ferryd = itest::required_env("FERRYD");
  std::vector<std::string> args;
  if (mode_ == NetMode::Netns) args = {"ip", "netns", "exec", n.ns};
  args.insert(args.end(),
              {ferryd, "--runtime-dir", n.dir, "--listen", n.listen(), "--transport", flags_.transport, "--log-level",
               "info", "--heartbeat-ms", std::to_string(flags_.heartbeat_ms), "--peer-timeout-ms",
               std::to_string(flags_.peer_timeout_ms), "--connect-timeout-ms",
               std::to_string(flags_.connect_timeout_ms), "--channel-conns", std::to_string(flags_.channel_conns)});
  args.insert(args.end(), flags_.extra_args.begin(), flags_.extra_args.end());
  if (i < flags_.node_args.size()) args.insert(args.end(), flags_.node_args[i].begin(), flags_.node_args[i].end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log = n.dir + "/ferryd.log";
  std::fflush(nullptr);
  n.pid = ::fork();
  if (n.pid < 0) throw std::runtime_error("fork failed");
  if (n.pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test (meson may SIGKILL it)
    if (i < flags_.node_env.size()) {
      const std::string& kv = flags_.node_env[i];
      if (const auto eq = kv.find('='); eq != std::string::npos && eq > 0)
        ::setenv(kv.substr(0, eq).c_str(), kv.c_str() + eq + 1, 1);
    }
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "exec %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  NetnsLab::track_pid(n.pid);
  const auto deadline = Clock::now() + 8s;
  for (;;) {
    if (itest::path_exists(n.socket()) && itest::path_exists(n.control()) && listens_on(n.pid, n.port)) return {};
    if (!alive(i)) return Error(Status::DaemonGone, "ferryd exited before listening on " + n.listen());
    if (Clock::now() > deadline) {
      kill_hard(i);
      return Error(Status::Timeout, "no client/control socket or no TCP listener on " + n.listen() + " after 8 s");
    }
    std::this_thread::sleep_for(10ms);  // polling a condition (files, /proc) with a deadline
  }
}

bool Cluster::alive(std::size_t i) {
  Node& n = nodes_.at(i);
  if (n.pid <= 0) return false;
  int st = 0;
  if (::waitpid(n.pid, &st, WNOHANG) == n.pid) {
    NetnsLab::untrack_pid(n.pid);
    n.pid = -1;
    return false;
  }
  return true;
}

void Cluster::kill_hard(std::size_t i) {
  Node& n = nodes_.at(i);
  if (n.pid <= 0) return;
  ::kill(n.pid, SIGKILL);
  itest::reap(n.pid, 5s);
  NetnsLab::untrack_pid(n.pid);
  n.pid = -1;
}

pid_t Cluster::spawn_on(std::size_t i, const std::function<int()>& body) const {
  const std::string ns = nodes_.at(i).ns;
  return itest::spawn([ns, body]() -> int {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (!ns.empty() && !NetnsLab::enter(ns)) return itest::fail(98, "cannot enter namespace %s", ns.c_str());
    return body();
  });
}

std::string Cluster::unreachable_target(const std::string& service) const {
  if (mode_ == NetMode::Netns) return NetnsLab::vacant_address() + ":" + std::to_string(kNetnsPort) + "/" + service;
  return "127.0.0.1:" + std::to_string(pick_free_port()) + "/" + service;
}

std::string Cluster::log_tail(std::size_t i, std::size_t bytes) const {
  std::ifstream f(nodes_.at(i).dir + "/ferryd.log");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

bool Cluster::log_has(std::size_t i, std::string_view text, std::chrono::milliseconds within) const {
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    if (log_tail(i, 64 * 1024).find(text) != std::string::npos) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));  // polling a log file with a deadline
  }
}

}  // namespace ferry::mhtest
