// (a) Multi-process local messaging: one sink server, three senders with
// mixed sizes 1 B .. 1 MiB; every message checked (checksum, bytes, order).
#include <catch2/catch.hpp>

#include "tests/integration/traffic.h"

using namespace ferry::itest;

TEST_CASE("three senders to one sink: every message verified in per-sender order") {
  Daemon d;
  constexpr std::uint32_t kSenders = 3;
  constexpr std::uint64_t kPerSender = 150;
  Gate ready;
  const pid_t sink = spawn([&] { return run_sink({d.socket(), "sink", kSenders, kPerSender}, ready); });
  REQUIRE(ready.wait(10s));
  pid_t senders[kSenders];
  for (std::uint32_t i = 0; i < kSenders; ++i) {
    senders[i] = spawn([&, i] { return run_sender({d.socket(), "sink", i, kPerSender, 8}); });
  }
  for (pid_t p : senders) CHECK(reap(p, 30s) == 0);
  CHECK(reap(sink, 30s) == 0);
  CHECK(d.alive());
}
