#include <catch2/catch.hpp>

#include "daemon/engines/target.h"

using namespace ferry::daemon;

TEST_CASE("host:port parsing") {
  auto hp = parse_host_port("198.18.0.1:7000");
  REQUIRE(hp);
  CHECK(hp->host == "198.18.0.1");
  CHECK(hp->port == 7000);
  hp = parse_host_port("node-1");
  REQUIRE(hp);
  CHECK(hp->port == 0);
  hp = parse_host_port("[::1]:80");
  REQUIRE(hp);
  CHECK(hp->host == "::1");
  CHECK(hp->port == 80);
  for (const char* bad :
       {"", ":80", "h:", "h:0", "h:65536", "h:12a", "h:1:2", "[::1", "[]:1", "[::1]x", "a b:1", "[zz]:1"}) {
    INFO(bad);
    CHECK_FALSE(parse_host_port(bad));
  }
}

TEST_CASE("targets") {
  const std::optional<HostPort> own = HostPort{"198.18.0.1", 7000};
  auto t = parse_target("echo", own);
  CHECK(t.kind == TargetKind::Local);
  CHECK(t.service == "echo");

  t = parse_target("198.18.0.1:7000/echo", own);
  CHECK(t.kind == TargetKind::Local);
  CHECK(t.service == "echo");

  t = parse_target("198.18.0.2:7000/echo", own);
  CHECK(t.kind == TargetKind::Remote);
  CHECK(t.remote.host == "198.18.0.2");
  CHECK(t.remote.port == 7000);
  CHECK(t.service == "echo");

  CHECK(parse_target("198.18.0.1:7001/echo", own).kind == TargetKind::Remote);
  CHECK(parse_target("198.18.0.1/echo", own).kind == TargetKind::Remote);  // no default port
  CHECK(parse_target("198.18.0.1:7000/echo", std::nullopt).kind == TargetKind::Remote);

  const std::optional<HostPort> wildcard = HostPort{"0.0.0.0", 7000};
  CHECK(parse_target("127.0.0.1:7000/echo", wildcard).kind == TargetKind::Local);
  CHECK(parse_target("localhost:7000/echo", wildcard).kind == TargetKind::Local);
  CHECK(parse_target("198.18.0.9:7000/echo", wildcard).kind == TargetKind::Remote);

  for (const char* bad : {"", "/", "host/", "/echo", "bad name", "h:1/bad name", "h:x/echo", "h:1/a/b/"}) {
    INFO(bad);
    CHECK(parse_target(bad, own).kind == TargetKind::Invalid);
  }
}
