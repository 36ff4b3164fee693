// libferry's own log (client/src/log.h) against the scripted daemon: a
// client with the default options writes nothing to stdout or stderr
// through forged completions, rejected releases and a hang-up; the error a
// corrupt completion ring forces reaches the application's callback (C++
// and C) or, without one, one line on stderr; log_level and
// $FERRY_LOG_LEVEL choose what is said.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "client/src/log.h"
#include "ferry/client.h"
#include "ferry/ferry.h"
#include "tests/unit/client/fake_daemon.h"

using namespace ferry;
using ferry::test::FakeDaemon;

namespace {

// fds 1 and 2 go to temporary files while it lives (no Catch2 assertion
// in between: its report would land there too); take() restores them and
// returns what was written to each.
class CapturedOutput {
 public:
  CapturedOutput() {
    std::fflush(stdout);
    std::fflush(stderr);
    for (int i = 0; i < 2; ++i) {
      files_[i] = std::tmpfile();
      saved_[i] = ::dup(i + 1);
      ::dup2(::fileno(files_[i]), i + 1);
    }
  }
  ~CapturedOutput() { restore(); }
  struct Text {
    std::string out, err;
  };
  Text take() {
    restore();
    Text t;
    std::string* into[2] = {&t.out, &t.err};
    for (int i = 0; i < 2; ++i) {
      std::rewind(files_[i]);
      char buf[4096];
      std::size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, files_[i])) > 0) into[i]->append(buf, n);
    }
    return t;
  }

 private:
  void restore() {
    if (saved_[0] < 0) return;
    std::fflush(stdout);
    std::fflush(stderr);
    for (int i = 0; i < 2; ++i) {
      ::dup2(saved_[i], i + 1);
      ::close(saved_[i]);
      saved_[i] = -1;
    }
  }
  std::FILE* files_[2] = {nullptr, nullptr};
  int saved_[2] = {-1, -1};
};

// Leaves $FERRY_LOG_LEVEL as the test found it.
class EnvLogLevel {
 public:
  explicit EnvLogLevel(const char* value) {
    if (const char* v = std::getenv("FERRY_LOG_LEVEL")) old_ = v;
    if (value != nullptr) {
      ::setenv("FERRY_LOG_LEVEL", value, 1);
    } else {
      ::unsetenv("FERRY_LOG_LEVEL");
    }
  }
  ~EnvLogLevel() {
    if (old_) {
      ::setenv("FERRY_LOG_LEVEL", old_->c_str(), 1);
    } else {
      ::unsetenv("FERRY_LOG_LEVEL");
    }
  }

 private:
  std::optional<std::string> old_;
};

struct Said {
  LogLevel level;
  std::string message;
};

std::unique_ptr<Client> attach_to(FakeDaemon& d, AttachOptions o = {}) {
  bool ok = false;
  std::thread t([&] { ok = d.accept_one(); });
  o.socket_path = d.socket_path();
  auto r = Client::attach(o);
  t.join();
  REQUIRE(ok);
  REQUIRE(r.status == Status::Ok);
  return std::move(r.value);
}

LogCallback collect(std::vector<Said>& into) {
  return [&into](LogLevel level, std::string_view message) { into.push_back({level, std::string(message)}); };
}

// A warning (a forged completion, dropped), a release the daemon rejects
// (another), then the daemon hangs up (info); polls until the client knows.
void warnings_then_hang_up(FakeDaemon& d, Client& c) {
  shm::CqEntry forged{};
  forged.kind = static_cast<std::uint8_t>(shm::CqKind::OpDone);
  forged.user_data = 12345;  // no such operation
  d.complete(forged);
  shm::CqEntry rejected{};
  rejected.kind = static_cast<std::uint8_t>(shm::CqKind::OpDone);
  rejected.status = static_cast<std::uint8_t>(Status::BadRequest);
  rejected.op = static_cast<std::uint8_t>(shm::Op::ReleaseRx);
  rejected.user_data = UINT64_MAX;  // how a quiet release's failure comes back
  d.complete(rejected);
  Completion out[4];
  (void)c.poll(out);
  d.hang_up();
  for (int i = 0; i < 100 && c.state() == Status::Ok; ++i) (void)c.wait(out, std::chrono::milliseconds(20));
}

// The daemon publishes a CQ head further ahead than the ring holds: the
// client detaches with an Error.
void corrupt_ring(FakeDaemon& d, Client& c) {
  d.view().cq_header->head.store(d.cq().capacity() * 4);
  Completion out[4];
  (void)c.poll(out);
}

}  // namespace

TEST_CASE("a client with the default options writes nothing to stdout or stderr") {
  EnvLogLevel env(nullptr);
  FakeDaemon d;
  CapturedOutput captured;
  auto c = attach_to(d);
  warnings_then_hang_up(d, *c);
  c->detach();
  c.reset();
  const auto text = captured.take();
  CHECK(text.out.empty());
  CHECK(text.err.empty());
}

TEST_CASE("a forced error reaches the callback once, and nothing reaches stderr") {
  EnvLogLevel env(nullptr);
  FakeDaemon d;
  std::vector<Said> said;
  AttachOptions o;
  o.log = collect(said);
  CapturedOutput captured;
  auto c = attach_to(d, o);
  corrupt_ring(d, *c);
  const Status state = c->state();
  c.reset();
  const auto text = captured.take();
  CHECK(state == Status::DaemonGone);
  REQUIRE(said.size() == 1);
  CHECK(said[0].level == LogLevel::Error);
  CHECK(said[0].message == "the daemon published a corrupt completion ring head; detaching");
  CHECK(text.out.empty());
  CHECK(text.err.empty());
}

TEST_CASE("without a callback an error is one line on stderr") {
  EnvLogLevel env(nullptr);
  FakeDaemon d;
  CapturedOutput captured;
  auto c = attach_to(d);
  corrupt_ring(d, *c);
  c.reset();
  const auto text = captured.take();
  CHECK(text.out.empty());
  CHECK(text.err == "ferry: error: the daemon published a corrupt completion ring head; detaching\n");
}

TEST_CASE("log_level, else FERRY_LOG_LEVEL, chooses what is said") {
  std::vector<Said> said;
  AttachOptions o;
  o.log = collect(said);
  auto levels = [&] {
    std::vector<LogLevel> l;
    for (const Said& s : said) l.push_back(s.level);
    return l;
  };

  SECTION("log_level Debug: attach, both warnings, the hang-up") {
    EnvLogLevel env("off");  // the option wins over the environment
    o.log_level = LogLevel::Debug;
    FakeDaemon d;
    auto c = attach_to(d, o);
    warnings_then_hang_up(d, *c);
    CHECK(levels() == std::vector{LogLevel::Debug, LogLevel::Warn, LogLevel::Warn, LogLevel::Info});
    CHECK(said[0].message.find("attached to " + d.socket_path() + " as client 42") == 0);
    CHECK(said[1].message.find("dropped an invalid completion from the daemon") == 0);
    CHECK(said[2].message == "the daemon rejected a ReleaseRx (BadRequest)");
    CHECK(said[3].message == "the daemon connection closed; 0 operations in flight fail with DaemonGone");
  }
  SECTION("FERRY_LOG_LEVEL=warn: the warnings only") {
    EnvLogLevel env("WARN");
    FakeDaemon d;
    auto c = attach_to(d, o);
    warnings_then_hang_up(d, *c);
    CHECK(levels() == std::vector{LogLevel::Warn, LogLevel::Warn});
  }
  SECTION("FERRY_LOG_LEVEL=off: not even the error") {
    EnvLogLevel env("off");
    FakeDaemon d;
    auto c = attach_to(d, o);
    corrupt_ring(d, *c);
    CHECK(c->state() == Status::DaemonGone);
    CHECK(said.empty());
  }
  SECTION("an unknown FERRY_LOG_LEVEL is the default: errors") {
    EnvLogLevel env("loud");
    FakeDaemon d;
    auto c = attach_to(d, o);
    warnings_then_hang_up(d, *c);
    CHECK(said.empty());
  }
}

TEST_CASE("a callback that throws loses its message, not the client") {
  EnvLogLevel env(nullptr);
  FakeDaemon d;
  AttachOptions o;
  o.log = [](LogLevel, std::string_view) { throw std::runtime_error("no"); };
  o.log_level = LogLevel::Debug;
  auto c = attach_to(d, o);
  Buffer b = c->alloc(64);
  CHECK(c->send(1, b, 8, 1) == Status::Ok);
  corrupt_ring(d, *c);
  CHECK(c->state() == Status::DaemonGone);
}

TEST_CASE("level names") {
  using client_detail::parse_log_level;
  CHECK(parse_log_level("debug") == LogLevel::Debug);
  CHECK(parse_log_level("Info") == LogLevel::Info);
  CHECK(parse_log_level("warn") == LogLevel::Warn);
  CHECK(parse_log_level("warning") == LogLevel::Warn);
  CHECK(parse_log_level("ERROR") == LogLevel::Error);
  CHECK(parse_log_level("off") == LogLevel::Off);
  CHECK_FALSE(parse_log_level(""));
  CHECK_FALSE(parse_log_level("err"));
  CHECK_FALSE(parse_log_level("debugx"));
  for (LogLevel l : {LogLevel::Debug, LogLevel::Info, LogLevel::Warn, LogLevel::Error, LogLevel::Off})
    CHECK(parse_log_level(to_string(l)) == l);
}

namespace {

struct CSaid {
  int calls = 0;
  int level = -1;
  std::string message;
};

extern "C" void c_log(void* context, int level, const char* message) {
  auto* s = static_cast<CSaid*>(context);
  ++s->calls;
  s->level = level;
  s->message = message;
}

}  // namespace

TEST_CASE("the C API takes a log function, its context and a level") {
  EnvLogLevel env(nullptr);
  FakeDaemon d;
  CSaid said;
  ferry_attach_options o{};
  o.socket_path = d.socket_path().c_str();
  o.log = c_log;
  o.log_context = &said;
  ferry_client* client = nullptr;
  bool ok = false;
  std::thread t([&] { ok = d.accept_one(); });
  const int s = ferry_attach(&o, &client);
  t.join();
  REQUIRE(ok);
  REQUIRE(s == FERRY_OK);
  d.view().cq_header->head.store(d.cq().capacity() * 4);
  ferry_completion out[4];
  (void)ferry_poll(client, out, 4);
  CHECK(ferry_state(client) == FERRY_DAEMON_GONE);
  ferry_detach(client);
  CHECK(said.calls == 1);
  CHECK(said.level == FERRY_LOG_ERROR);
  CHECK(said.message == "the daemon published a corrupt completion ring head; detaching");

  o.log_level = FERRY_LOG_OFF + 1;
  CHECK(ferry_attach(&o, &client) == FERRY_BAD_REQUEST);
  CHECK(client == nullptr);
}
