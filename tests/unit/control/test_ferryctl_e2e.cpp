// ferryctl end to end: the real binary (path in $FERRYCTL, set by meson)
// run as a child process against a fake control server on a temp socket.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "base/json.h"
#include "fake_control_server.h"

extern char** environ;

using namespace ferry;

namespace {

struct Run {
  int exit_code = -1;
  std::string out, err;
};

// Runs ferryctl with `args` and extra environment, bounded to 10 s.
Run ferryctl(const std::vector<std::string>& args, const std::vector<std::string>& env_extra = {}) {
  const char* exe = std::getenv("FERRYCTL");
  REQUIRE(exe != nullptr);
  std::vector<std::string> argv_s{exe};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The test's own FERRY_* variables must not leak into the child.
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    if (kv.rfind("FERRY_", 0) != 0) env_s.push_back(kv);
  }
  env_s.insert(env_s.end(), env_extra.begin(), env_extra.end());
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  REQUIRE(::pipe(out_pipe) == 0);
  REQUIRE(::pipe(err_pipe) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) posix_spawn_file_actions_addclose(&fa, fd);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe, &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  REQUIRE(rc == 0);

  Run r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(pid, SIGKILL);
      FAIL_CHECK("ferryctl did not finish within 10 s");
      break;
    }
    pollfd p[2] = {{out_open ? out_pipe[0] : -1, POLLIN, 0}, {err_open ? err_pipe[0] : -1, POLLIN, 0}};
    if (::poll(p, 2, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    for (int i = 0; i < 2; ++i) {
      if (p[i].revents == 0) continue;
      const ssize_t n = ::read(p[i].fd, buf, sizeof buf);
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
      }
    }
  }
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

const char* kStatus =
    R"({"ok":true,"result":{"version":"0.1.0","uptime_s":12,"transport":"tcp","clients":1,"pid":77,)"
    R"("cpu_user_us":2000,"cpu_sys_us":1000,"peers":[{"addr":"198.18.0.2:7000","state":"up","epoch":3}],)"
    R"("channels":[],)"
    R"("counters":{"rnr_naks":0,"retransmits":4,"recoveries":0,"credit_stalls":1,"window_stalls":0}}})";
const char* kClients =
    R"({"ok":true,"result":[{"id":1,"pid":500,"uid":1000,"name":"ps-worker","memory":1048576,"endpoints":2,"services":[]}]})";

json::Value only_json_line(const std::string& out) {
  REQUIRE(!out.empty());
  REQUIRE(out.back() == '\n');
  REQUIRE(out.find('\n') == out.size() - 1);  // exactly one line
  json::ParseError e;
  auto v = json::parse(out, &e);
  INFO(out << " error: " << e.message);
  REQUIRE(v.has_value());
  return *v;
}

}  // namespace

TEST_CASE("ferryctl e2e: --json outputs are the daemon's results", "[ferryctl][e2e]") {
  test::FakeControlServer server({{"status", kStatus}, {"clients", kClients}});
  const std::string& sock = server.socket_path();

  auto r = ferryctl({"--control", sock, "status", "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto status = only_json_line(r.out);
  REQUIRE(status.is_object());
  for (const char* k : {"version", "uptime_s", "transport", "clients", "peers", "counters"}) {
    CHECK(status.find(k) != nullptr);
  }
  CHECK(json::dump(status) == json::dump(*json::parse(kStatus)->find("result")));

  r = ferryctl({"clients", "--json", "--control", sock});
  REQUIRE(r.exit_code == 0);
  auto clients = only_json_line(r.out);
  REQUIRE(clients.as_array() != nullptr);
  CHECK(*clients.as_array()->at(0).find("name")->as_string() == "ps-worker");

  // counters/peers/channels are not implemented by this daemon: ferryctl
  // falls back to the status members.
  r = ferryctl({"--control", sock, "counters", "--json"});
  REQUIRE(r.exit_code == 0);
  CHECK(only_json_line(r.out).find("retransmits")->as_int() == 4);
  r = ferryctl({"--control", sock, "peers", "--json"});
  REQUIRE(r.exit_code == 0);
  CHECK(*only_json_line(r.out).as_array()->at(0).find("addr")->as_string() == "198.18.0.2:7000");
  r = ferryctl({"--control", sock, "channels", "--json"});
  REQUIRE(r.exit_code == 0);
  CHECK(only_json_line(r.out).as_array()->empty());
  r = ferryctl({"--control", sock, "channels"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "no channels\n");

  r = ferryctl({"--control", sock, "top", "--json", "--count", "2", "--interval", "0.05"});
  REQUIRE(r.exit_code == 0);
  const auto nl = r.out.find('\n');
  REQUIRE(nl != std::string::npos);
  auto first = json::parse(r.out.substr(0, nl));
  auto second = json::parse(r.out.substr(nl + 1));
  REQUIRE(first.has_value());
  REQUIRE(second.has_value());
  CHECK(second->find("rates")->find("retransmits")->as_double() == 0.0);

  CHECK(server.commands() == std::vector<std::string>{"status", "clients", "counters", "status", "peers", "status",
                                                      "channels", "status", "channels", "status", "status", "status"});
}

TEST_CASE("ferryctl e2e: human output, metrics and the environment", "[ferryctl][e2e]") {
  test::FakeControlServer server({{"status", kStatus}, {"clients", kClients}});
  auto r = ferryctl({"status"}, {"FERRY_CONTROL=" + server.socket_path()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("version:    0.1.0") != std::string::npos);
  CHECK(r.out.find("198.18.0.2:7000") != std::string::npos);
  CHECK(r.out.find("retransmits") != std::string::npos);

  // dirname($FERRY_SOCKET)/control.sock
  r = ferryctl({"clients"}, {"FERRY_SOCKET=" + server.dir() + "/ferryd.sock"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("ps-worker") != std::string::npos);
  CHECK(r.out.find("1.0 MiB") != std::string::npos);

  r = ferryctl({"metrics", "--control", server.socket_path()});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("# TYPE ferry_retransmits_total counter\nferry_retransmits_total 4\n") != std::string::npos);
  CHECK(r.out.find("ferry_info{version=\"0.1.0\",transport=\"tcp\"} 1\n") != std::string::npos);

  r = ferryctl({"top", "--count", "2", "--interval", "0.05", "--control", server.socket_path()});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("RATE/S") != r.out.rfind("RATE/S"));  // two frames
  CHECK(r.out.find("\x1b[") == std::string::npos);       // no escapes when not a terminal
}

TEST_CASE("ferryctl e2e: daemon errors and unreachable sockets exit 1", "[ferryctl][e2e]") {
  test::FakeControlServer server({{"status", R"({"ok":true,"result":{"version":"0.1.0"}})"},
                                  {"clients", test::FakeControlServer::kCloseWithoutReply}});
  // Unknown to this daemon and absent from status: the daemon's error, cleanly.
  auto r = ferryctl({"--control", server.socket_path(), "drain"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "ferryctl: drain: daemon error: unknown command: drain\n");
  r = ferryctl({"--control", server.socket_path(), "channels", "--json"});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "ferryctl: channels: daemon error: unknown command: channels\n");
  r = ferryctl({"--control", server.socket_path(), "clients"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("closed the connection") != std::string::npos);

  const std::string missing = server.dir() + "/nothing.sock";
  for (const char* cmd : {"status", "clients", "counters", "peers", "channels", "metrics", "top"}) {
    r = ferryctl({"--control", missing, cmd, "--count", "1"});
    INFO(cmd);
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "ferryctl: cannot connect to " + missing + ": No such file or directory\n");
  }
}

TEST_CASE("ferryctl e2e: usage, help and version", "[ferryctl][e2e]") {
  auto r = ferryctl({});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("no command") != std::string::npos);
  r = ferryctl({"frobnicate"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("unknown command 'frobnicate'") != std::string::npos);
  r = ferryctl({"status", "--nope"});
  CHECK(r.exit_code == 2);
  r = ferryctl({"--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("usage: ferryctl", 0) == 0);
  r = ferryctl({"help"});
  CHECK(r.exit_code == 0);
  r = ferryctl({"--version"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("ferryctl ", 0) == 0);
}

namespace {

// Starts `ferryctl top` without --count, with `stdin_fd` as its stdin, and
// waits until its first frame is on stdout; returns the pid and the stdout
// pipe (for reading further output).
std::pair<pid_t, int> start_top(const std::string& sock, int stdin_fd) {
  const char* exe = std::getenv("FERRYCTL");
  REQUIRE(exe != nullptr);
  std::vector<std::string> argv_s{exe, "--control", sock, "top", "--interval", "0.05"};
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out_pipe[2];
  REQUIRE(::pipe(out_pipe) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, stdin_fd, 0);
  posix_spawn_file_actions_addclose(&fa, out_pipe[0]);
  posix_spawn_file_actions_addclose(&fa, out_pipe[1]);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_pipe[1]);
  REQUIRE(rc == 0);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (out.find("RATE/S") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{out_pipe[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(out_pipe[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  CHECK(out.find("RATE/S") != std::string::npos);
  return {pid, out_pipe[0]};
}

// Exit code of `pid`, or -1 (after killing it) if it is still running at the deadline.
int wait_exit(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    ::poll(nullptr, 0, 20);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("ferryctl e2e: top runs until Ctrl-C or q", "[ferryctl][e2e]") {
  test::FakeControlServer server(std::map<std::string, std::string>{{"status", kStatus}});
  {
    const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    auto [pid, out] = start_top(server.socket_path(), devnull);
    ::close(devnull);
    REQUIRE(::kill(pid, SIGINT) == 0);
    CHECK(wait_exit(pid, std::chrono::seconds(5)) == 0);
    ::close(out);
  }
  {
    // 'q' is read from a terminal only: give it a pseudo-terminal as stdin.
    const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    REQUIRE(master >= 0);
    REQUIRE(::grantpt(master) == 0);
    REQUIRE(::unlockpt(master) == 0);
    const int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
    REQUIRE(slave >= 0);
    auto [pid, out] = start_top(server.socket_path(), slave);
    ::close(slave);
    REQUIRE(::write(master, "q", 1) == 1);
    CHECK(wait_exit(pid, std::chrono::seconds(5)) == 0);
    ::close(out);
    ::close(master);
  }
}
