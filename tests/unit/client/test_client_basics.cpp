// libferry without a daemon: names, to_string coverage, attach failures that
// must come back as clean statuses, and the C API's thin conversions.
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "client/src/names.h"
#include "ferry/client.h"
#include "ferry/ferry.h"

using namespace ferry;

TEST_CASE("service names and targets are checked on their face") {
  using client_detail::valid_service_name;
  using client_detail::valid_target;
  CHECK(valid_service_name("echo"));
  CHECK(valid_service_name("a.b_c-9"));
  CHECK(valid_service_name(std::string(64, 'x')));
  CHECK_FALSE(valid_service_name(""));
  CHECK_FALSE(valid_service_name(std::string(65, 'x')));
  CHECK_FALSE(valid_service_name("has space"));
  CHECK_FALSE(valid_service_name("slash/name"));
  CHECK_FALSE(valid_service_name(std::string("nul\0x", 5)));

  CHECK(valid_target("echo"));
  CHECK(valid_target("host/echo"));
  CHECK(valid_target("198.18.0.1:7000/echo"));
  CHECK(valid_target("[::1]:7000/echo"));
  CHECK(valid_target("[fe80::1]/svc"));
  CHECK_FALSE(valid_target(""));
  CHECK_FALSE(valid_target("/echo"));
  CHECK_FALSE(valid_target("host/"));
  CHECK_FALSE(valid_target("host:0/echo"));
  CHECK_FALSE(valid_target("host:65536/echo"));
  CHECK_FALSE(valid_target("host:/echo"));
  CHECK_FALSE(valid_target("host:12x/echo"));
  CHECK_FALSE(valid_target("ho st/echo"));
  CHECK_FALSE(valid_target("[::1/echo"));
  CHECK_FALSE(valid_target(std::string(260, 'h') + "/echo"));
}

TEST_CASE("every enum value has its own name") {
  for (int i = 0; i <= kMaxStatus; ++i) CHECK(to_string(static_cast<Status>(i)) != "Unknown");
  CHECK(to_string(static_cast<Status>(kMaxStatus + 1)) == "Unknown");
  for (int i = 0; i <= static_cast<int>(OpKind::ReleaseRx); ++i) CHECK(to_string(static_cast<OpKind>(i)) != "Unknown");
  CHECK(to_string(OpKind::Call) == "Call");
  CHECK(to_string(static_cast<OpKind>(200)) == "Unknown");
  CHECK(to_string(Completion::Kind::OpDone) == "OpDone");
  CHECK(to_string(Completion::Kind::Message) == "Message");
  CHECK(to_string(Completion::Kind::Request) == "Request");
  CHECK(to_string(static_cast<Completion::Kind>(9)) == "Unknown");
  CHECK(std::string(ferry_status_string(0)) == "Ok");
  CHECK(std::string(ferry_status_string(11)) == "DaemonGone");
  CHECK(std::string(ferry_status_string(-1)) == "Unknown");
  CHECK(std::string(ferry_status_string(999)) == "Unknown");
}

TEST_CASE("default socket path follows FERRY_SOCKET") {
  const char* old = std::getenv("FERRY_SOCKET");
  std::string saved = old ? old : "";
  ::setenv("FERRY_SOCKET", "/tmp/x/ferryd.sock", 1);
  CHECK(default_socket_path() == "/tmp/x/ferryd.sock");
  ::unsetenv("FERRY_SOCKET");
  CHECK(default_socket_path() == "/run/ferry/ferryd.sock");
  if (old) ::setenv("FERRY_SOCKET", saved.c_str(), 1);
}

TEST_CASE("attach without a daemon fails cleanly") {
  AttachOptions o;
  o.socket_path = "/nonexistent-ferry-dir/ferryd.sock";
  auto r = Client::attach(o);
  CHECK(r.status == Status::DaemonGone);
  CHECK(r.value == nullptr);

  o.socket_path = std::string(200, 'p');  // longer than sun_path
  CHECK(Client::attach(o).status == Status::BadRequest);

  // A socket file nobody listens on any more.
  char dir[] = "/tmp/ferry-unit-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  std::string path = std::string(dir) + "/dead.sock";
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  ::close(fd);
  o.socket_path = path;
  CHECK(Client::attach(o).status == Status::DaemonGone);

  ferry_client* c = reinterpret_cast<ferry_client*>(1);
  ferry_attach_options co{};
  co.socket_path = path.c_str();
  CHECK(ferry_attach(&co, &c) == static_cast<int>(Status::DaemonGone));
  CHECK(c == nullptr);
  CHECK(ferry_attach(&co, nullptr) == static_cast<int>(Status::BadRequest));
  ::unlink(path.c_str());
  ::rmdir(dir);
}

TEST_CASE("attach to a peer that answers garbage fails with ProtocolError") {
  // A listening socket whose peer answers a short, fd-less message.
  char dir[] = "/tmp/ferry-unit-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  std::string path = std::string(dir) + "/bad.sock";
  int lfd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  REQUIRE(::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(lfd, 1) == 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    int c = ::accept(lfd, nullptr, nullptr);
    char buf[128];
    (void)::recv(c, buf, sizeof buf, 0);
    (void)::send(c, "garbage", 7, 0);
    (void)::recv(c, buf, sizeof buf, 0);  // until the client hangs up
    ::_exit(0);
  }
  AttachOptions o;
  o.socket_path = path;
  CHECK(Client::attach(o).status == Status::ProtocolError);
  int st = 0;
  ::waitpid(pid, &st, 0);
  ::close(lfd);
  ::unlink(path.c_str());
  ::rmdir(dir);
}
