// LogLimiter (transport/log_limiter.h): one line per interval, carrying the
// count of the events that were not logged.
#include <catch2/catch.hpp>

#include "transport/log_limiter.h"

using ferry::transport::LogLimiter;

TEST_CASE("log limiter: the first event logs, a flood within the interval is counted into the next line") {
  LogLimiter l(1000);
  std::uint64_t skipped = 99;
  CHECK(l.allow(5, skipped));
  CHECK(skipped == 0);
  int logged = 0;
  for (std::uint64_t t = 6; t < 1005; ++t) logged += l.allow(t, skipped) ? 1 : 0;
  CHECK(logged == 0);
  CHECK(l.allow(1005, skipped));
  CHECK(skipped == 999);
  CHECK(!l.allow(1006, skipped));
  CHECK(l.allow(5000, skipped));
  CHECK(skipped == 1);
  CHECK(l.events() == 1003);
}
