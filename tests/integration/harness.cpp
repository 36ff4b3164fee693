#include "tests/integration/harness.h"

#include "base/json.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace ferry::itest {

std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') throw std::runtime_error(std::string(name) + " is not set (run through meson test)");
  return v;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

Daemon::Daemon() : Daemon(std::vector<std::string>{}) {}

Daemon::Daemon(const std::vector<std::string>& extra_args) : args_(extra_args) {
  char tmpl[] = "/tmp/ferry-itest-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  launch();
}

void Daemon::launch() {
  const std::string ferryd = required_env("FERRYD");
  // Never outlive a test binary that crashes or is killed (meson's timeout):
  // the parent-death signal follows the forking thread, so only where that
  // is the main thread, which outlives every Daemon made on it.
  const pid_t parent = ::getpid();
  const bool main_thread = ::gettid() == parent;
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    if (main_thread && (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent)) ::_exit(126);
    std::vector<const char*> argv{ferryd.c_str(), "--runtime-dir", dir_.c_str(), "--log-level", "warn"};
    for (const std::string& a : args_) argv.push_back(a.c_str());
    argv.push_back(nullptr);
    ::execv(ferryd.c_str(), const_cast<char* const*>(argv.data()));
    std::fprintf(stderr, "exec %s: %s\n", ferryd.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  const auto deadline = Clock::now() + 5s;
  while (!(path_exists(socket()) && path_exists(control()))) {
    if (!alive() || Clock::now() > deadline) {
      kill_hard();
      throw std::runtime_error("ferryd did not come up in " + dir_);
    }
    std::this_thread::sleep_for(5ms);  // polling a file system condition, with a deadline
  }
}

void Daemon::restart() {
  kill_hard();
  for (const std::string& path : {socket(), control()}) ::unlink(path.c_str());  // what the killed one left
  launch();
}

Daemon::~Daemon() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    if (reap(pid_, 3s) < 0) std::fprintf(stderr, "ferryd ignored SIGTERM; killed\n");
    pid_ = -1;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

bool Daemon::alive() {
  if (pid_ <= 0) return false;
  int st = 0;
  const pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

void Daemon::kill_hard() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  reap(pid_, 5s);
  pid_ = -1;
}

long Daemon::clients() const { return status_number("clients"); }

long Daemon::status_number(const std::string& key) const {
  const std::string cmd = required_env("FERRYCTL") + " --control " + control() + " status --json 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (::pclose(p) != 0) return -1;
  const auto at = out.find("\"" + key + "\"");
  if (at == std::string::npos) return -1;
  const auto colon = out.find(':', at);
  if (colon == std::string::npos) return -1;
  return std::strtol(out.c_str() + colon + 1, nullptr, 10);
}

long Daemon::engine_number(std::uint32_t engine, const std::string& key) const {
  const std::string cmd = required_env("FERRYCTL") + " --control " + control() + " status --json 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (::pclose(p) != 0) return -1;
  const std::optional<json::Value> v = json::parse(out);
  const json::Value* engines = v ? v->find("engines") : nullptr;
  const json::Array* a = engines != nullptr ? engines->as_array() : nullptr;
  if (a == nullptr || engine >= a->size()) return -1;
  const json::Value* x = (*a)[engine].find(key);
  const std::optional<std::int64_t> num = x != nullptr ? x->as_int() : std::nullopt;
  return num ? static_cast<long>(*num) : -1;
}

bool Daemon::wait_clients(long want, std::chrono::milliseconds within) const {
  const auto deadline = Clock::now() + within;
  for (;;) {
    if (clients() == want) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);  // polling ferryctl with a deadline
  }
}

bool Daemon::wait_clients_at_most(long most, std::chrono::milliseconds within) const {
  const auto deadline = Clock::now() + within;
  for (;;) {
    const long n = clients();
    if (n >= 0 && n <= most) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
}

pid_t spawn(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  int rc = 99;
  try {
    rc = body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child %d: exception: %s\n", ::getpid(), e.what());
  }
  std::fflush(nullptr);
  ::_exit(rc);
}

pid_t spawn_on_engine(std::uint32_t engine, const std::function<int()>& body) {
  return spawn([engine, body] {
    ::setenv("FERRY_ENGINE", std::to_string(engine).c_str(), 1);
    return body();
  });
}

int reap(pid_t pid, std::chrono::milliseconds within) {
  const auto deadline = Clock::now() + within;
  int st = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (r < 0) return -1;
    if (Clock::now() > deadline) {
      std::fprintf(stderr, "process %d overran its deadline; killing it\n", pid);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(2ms);  // waitpid has no timeout
  }
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

namespace {

// Whether every thread of pid is stopped (and it has at least one).
bool all_threads_stopped(pid_t pid) {
  std::error_code ec;
  bool any = false;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream f(task.path() / "stat");
    std::string stat;
    std::getline(f, stat);
    const std::size_t comm_end = stat.rfind(')');  // the state follows the command name, which may hold anything
    if (comm_end == std::string::npos || comm_end + 2 >= stat.size()) return false;
    const char state = stat[comm_end + 2];
    if (state != 'T' && state != 't') return false;
    any = true;
  }
  return any && !ec;
}

}  // namespace

bool stop_process(pid_t pid, std::chrono::milliseconds within) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  const auto deadline = Clock::now() + within;
  while (!all_threads_stopped(pid)) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

Gate::Gate() {
  if (::pipe2(fds_, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
}

Gate::~Gate() {
  ::close(fds_[0]);
  ::close(fds_[1]);
}

void Gate::signal() const {
  const char b = 1;
  (void)!::write(fds_[1], &b, 1);
}

bool Gate::wait(std::chrono::milliseconds within) const {
  pollfd p{fds_[0], POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(within.count())) != 1) return false;
  char b;
  return ::read(fds_[0], &b, 1) == 1;
}

bool Gate::ready() const {
  pollfd p{fds_[0], POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

std::unique_ptr<Client> attach_retry(const std::string& socket, const std::string& name,
                                     std::chrono::milliseconds within) {
  const auto deadline = Clock::now() + within;
  AttachOptions o;
  o.socket_path = socket;
  o.name = name;
  for (;;) {
    auto r = Client::attach(o);
    if (r) return std::move(r.value);
    // DaemonGone: not listening yet. Timeout: the daemon was slow to answer
    // (under the Soft-RoCE VM registering a segment takes seconds each, one
    // attach at a time); it hangs up on the abandoned attach by itself.
    if ((r.status != Status::DaemonGone && r.status != Status::Timeout) || Clock::now() > deadline) {
      std::fprintf(stderr, "%s: attach failed: %s\n", name.c_str(), std::string(to_string(r.status)).c_str());
      return nullptr;
    }
    std::this_thread::sleep_for(10ms);
  }
}

Result<EndpointId> open_retry(Client& c, const std::string& target, std::chrono::milliseconds within) {
  const auto deadline = Clock::now() + within;
  for (;;) {
    auto r = c.open(target);
    if (r.status != Status::ServiceNotFound || Clock::now() > deadline) return r;
    std::this_thread::sleep_for(10ms);
  }
}

Completion call_once(Client& c, EndpointId ep, const Buffer& req, std::uint32_t len, const Buffer& resp,
                     std::uint64_t tag, std::chrono::milliseconds within) {
  Completion out{};
  out.status = c.call(ep, req, len, resp, tag);
  if (out.status != Status::Ok) return out;  // refused at submission
  out.status = Status::Timeout;
  const auto deadline = Clock::now() + within;
  while (Clock::now() < deadline) {
    Completion got[4];
    const std::size_t n = c.wait(got, 100ms);
    for (std::size_t i = 0; i < n; ++i) {
      if (got[i].kind == Completion::Kind::OpDone && got[i].user_data == tag) return got[i];
    }
  }
  return out;
}

int fail(int code, const char* fmt, ...) {
  std::fprintf(stderr, "[pid %d] FAIL: ", ::getpid());
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  return code == 0 || code == 77 ? 1 : code;
}

}  // namespace ferry::itest
