#include "tests/flow/bench_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace ferry::flowtest {

BenchRun run_bench(const std::vector<std::string>& args, std::chrono::seconds deadline) {
  const char* bench = std::getenv("FERRY_BENCH");
  if (bench == nullptr || *bench == '\0') throw std::runtime_error("FERRY_BENCH is not set (run through meson test)");
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> all{bench};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  BenchRun r;
  std::string errs;
  const auto until = std::chrono::steady_clock::now() + deadline;
  bool open[2] = {true, true};
  bool killed = false;
  while (open[0] || open[1]) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    if (left <= 0 && !killed) {
      ::kill(pid, SIGKILL);  // the bench's children die with it (PDEATHSIG)
      killed = true;
    }
    pollfd p[2] = {{open[0] ? out[0] : -1, POLLIN, 0}, {open[1] ? err[0] : -1, POLLIN, 0}};
    if (::poll(p, 2, killed ? 1000 : static_cast<int>(std::min<long>(left, 1000))) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = ::read(i == 0 ? out[0] : err[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        open[i] = false;
        continue;
      }
      (i == 0 ? r.stdout_text : errs).append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(out[0]);
  ::close(err[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.exit_code = killed ? 124 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.stderr_tail = errs.size() > 3000 ? errs.substr(errs.size() - 3000) : errs;
  std::size_t pos = 0;
  while (pos < r.stdout_text.size()) {
    const std::size_t nl = r.stdout_text.find('\n', pos);
    const std::string line = r.stdout_text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? r.stdout_text.size() : nl + 1;
    if (auto v = json::parse(line); v && v->is_object()) r.lines.push_back(std::move(*v));
  }
  return r;
}

std::optional<double> number(const json::Value& line, const char* key) {
  const json::Value* v = line.find(key);
  return v ? v->as_double() : std::nullopt;
}

std::uint64_t uint_field(const json::Value& line, const char* key) {
  const json::Value* v = line.find(key);
  return v ? v->as_uint().value_or(0) : 0;
}

std::vector<std::string> windows_off_args() {
  return {"--endpoint-window-ops",  "0", "--channel-window-ops", "0",
          "--channel-window-bytes", "0", "--nic-window-bytes",   "0"};
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace ferry::flowtest
