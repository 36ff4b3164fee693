#include "daemon/front/accept_backoff.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <vector>

#include "ferry/retry_pause.h"

using std::chrono::milliseconds;

TEST_CASE("retry pause: 100 ms, doubling to 2 s, from 100 ms again after a success", "[backoff]") {
  ferry::RetryPause p;
  CHECK(p.peek() == milliseconds(100));
  std::vector<long> seen;
  for (int i = 0; i < 8; ++i) seen.push_back(static_cast<long>(p.next().count()));
  CHECK(seen == std::vector<long>{100, 200, 400, 800, 1600, 2000, 2000, 2000});
  CHECK(p.peek() == milliseconds(2000));
  p.reset();
  CHECK(p.next() == milliseconds(100));
  CHECK(p.next() == milliseconds(200));
}

TEST_CASE("accept backoff: waits only for resource errors, doubling, reset by an accept", "[backoff]") {
  using ferry::daemon::AcceptBackoff;
  CHECK(AcceptBackoff::is_resource_error(EMFILE));
  CHECK(AcceptBackoff::is_resource_error(ENFILE));
  CHECK(AcceptBackoff::is_resource_error(ENOBUFS));
  CHECK(AcceptBackoff::is_resource_error(ENOMEM));
  CHECK_FALSE(AcceptBackoff::is_resource_error(ECONNABORTED));
  AcceptBackoff b("test listener");
  CHECK(b.on_failure(EMFILE) == milliseconds(100));
  CHECK(b.on_failure(EMFILE) == milliseconds(200));
  CHECK(b.on_failure(ENFILE) == milliseconds(400));
  b.on_success();
  CHECK(b.on_failure(EMFILE) == milliseconds(100));
  CHECK(b.failures() == 4);
}
