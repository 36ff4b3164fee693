// libferry does not log into the application: a client process attached
// to a real ferryd with the default options (only the socket and a name
// set) serves, opens, calls, replies, sends, closes and detaches, and
// then again meets the daemon's death, without writing one byte to stdout
// or stderr. A client given a log callback at Info hears of that death
// through it, and writes nothing either.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/traffic.h"

using namespace ferry;
using namespace ferry::itest;

namespace {

// A temporary file for a child's fds 1 and 2; contents() after it exited.
class OutputFile {
 public:
  OutputFile() {
    char name[] = "/tmp/ferry-quiet-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    ::close(fd);
    path_ = name;
  }
  ~OutputFile() { ::unlink(path_.c_str()); }
  // In the child: stdout and stderr go to the file from now on.
  void redirect() const {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) _exit(90);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  std::string contents() const {
    std::ifstream in(path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  std::string path_;
};

// Every completion of `c` until one OpDone of `tag` (Requests answered with
// their own bytes, Messages released). Its status, or Timeout.
Status pump_until(Client& c, std::uint64_t tag, const Buffer& answer) {
  const auto deadline = Clock::now() + 10s;
  Completion out[8];
  while (Clock::now() < deadline) {
    const std::size_t n = c.wait(out, 100ms);
    for (std::size_t i = 0; i < n; ++i) {
      const Completion& x = out[i];
      if (x.kind == Completion::Kind::Request) {
        std::memcpy(answer.data, x.data, x.length);
        const std::uint32_t length = x.length;
        c.release(x);
        if (Status s = c.reply(x.token, answer, length, 1000 + tag); s != Status::Ok) return s;
      } else if (x.kind == Completion::Kind::Message) {
        c.release(x);
      } else if (x.user_data == tag) {
        return x.status;
      } else if (x.status != Status::Ok) {
        return x.status;
      }
    }
  }
  return Status::Timeout;
}

// One process's ordinary life against the daemon at `socket`. Writes
// nothing itself: a failure is its exit code.
int ordinary_run(const std::string& socket) {
  auto c = attach_retry(socket, "quiet");
  if (!c) return 1;
  auto sid = c->serve("quiet");
  if (!sid) return 2;
  auto ep = c->open("quiet");
  if (!ep) return 3;
  Buffer req = c->alloc(256), resp = c->alloc(256), answer = c->alloc(256), msg = c->alloc(64);
  if (!req || !resp || !answer || !msg) return 4;
  fill_payload(req.data, 256, 7, 0);
  if (c->call(ep.value, req, 256, resp, 1) != Status::Ok) return 5;
  if (pump_until(*c, 1, answer) != Status::Ok) return 6;
  if (std::memcmp(req.data, resp.data, 256) != 0) return 7;
  if (c->send(ep.value, msg, 64, 2) != Status::Ok) return 8;
  if (pump_until(*c, 2, answer) != Status::Ok) return 9;
  if (c->close(ep.value) != Status::Ok) return 10;
  if (c->unserve(sid.value) != Status::Ok) return 11;
  c->detach();
  return 0;
}

}  // namespace

TEST_CASE("a client with the default options writes nothing on a normal run") {
  Daemon d;
  OutputFile output;
  const std::string socket = d.socket();
  const pid_t child = spawn([&] {
    output.redirect();
    return ordinary_run(socket);
  });
  CHECK(reap(child, 30s) == 0);
  CHECK(output.contents().empty());
}

TEST_CASE("the daemon's death: nothing written by default, the callback hears of it") {
  auto d = std::make_unique<Daemon>();
  OutputFile quiet_output, told_output;
  Gate quiet_ready, told_ready, died;
  const std::string socket = d->socket();
  auto wait_for_death = [](Client& c) {
    Completion out[8];
    const auto deadline = Clock::now() + 10s;
    while (c.state() == Status::Ok && Clock::now() < deadline) (void)c.wait(out, 100ms);
    return c.state();
  };
  const pid_t quiet = spawn([&] {
    quiet_output.redirect();
    auto c = attach_retry(socket, "quiet");
    if (!c) return 1;
    quiet_ready.signal();
    if (!died.wait(15s)) return 2;
    return wait_for_death(*c) == Status::DaemonGone ? 0 : 3;
  });
  const pid_t told = spawn([&] {
    told_output.redirect();
    std::vector<std::pair<LogLevel, std::string>> said;
    AttachOptions o;
    o.socket_path = socket;
    o.name = "told";
    o.log_level = LogLevel::Info;
    o.log = [&said](LogLevel level, std::string_view message) { said.emplace_back(level, std::string(message)); };
    auto r = Client::attach(o);
    if (!r) return 1;
    told_ready.signal();
    if (!died.wait(15s)) return 2;
    if (wait_for_death(*r.value) != Status::DaemonGone) return 3;
    if (said.size() != 1) return 4;
    if (said[0].first != LogLevel::Info) return 5;
    return said[0].second == "the daemon connection closed; 0 operations in flight fail with DaemonGone" ? 0 : 6;
  });
  REQUIRE(quiet_ready.wait(10s));
  REQUIRE(told_ready.wait(10s));
  d->kill_hard();
  died.signal();
  died.signal();
  CHECK(reap(quiet, 20s) == 0);
  CHECK(reap(told, 20s) == 0);
  CHECK(quiet_output.contents().empty());
  CHECK(told_output.contents().empty());
}
