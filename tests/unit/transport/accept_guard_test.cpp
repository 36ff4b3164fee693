// The admission rules both peer listeners apply (transport/accept_guard.h):
// the tcp transport's bootstrap listener and the rdma
// transport's connection manager (which cannot be driven without a device:
// its part is only to call these rules at each request, first receive and
// teardown). Also the rdma configuration's new limits.
#include <catch2/catch.hpp>

#include <netinet/in.h>

#include <cstring>

#include "transport/accept_guard.h"
#include "transport/rdma/rdma_config.h"

using namespace ferry;
using namespace ferry::transport;

namespace {

AcceptGuard::Source source(std::uint8_t last) {
  sockaddr_storage ss{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  v4->sin_family = AF_INET;
  v4->sin_addr.s_addr = htonl(0x7F000000u | last);
  return AcceptGuard::source_of(ss);
}

constexpr std::uint64_t kMs = 1'000'000;

}  // namespace

TEST_CASE("accept guard: per-source cap, budget, eviction of the oldest silent, deadlines") {
  AcceptGuardConfig cfg;
  cfg.max_connections = 8;
  cfg.reserve = 2;  // budget 6
  cfg.per_source = 3;
  cfg.hello_timeout_ms = 100;
  AcceptGuard g(cfg, "test listener");
  const auto a = source(1), b = source(2), c = source(3);
  std::uint32_t slot = 0;
  auto accept = [&](const AcceptGuard::Source& s, std::uint64_t now) {
    const auto d = g.admit(s, true);
    REQUIRE(d.verdict == AcceptGuard::Verdict::Admit);
    g.accepted(slot, s, now);
    return slot++;
  };
  const std::uint32_t a0 = accept(a, 1 * kMs), a1 = accept(a, 2 * kMs), a2 = accept(a, 3 * kMs);
  (void)a2;
  // A's fourth: its own oldest silent connection makes room.
  auto d = g.admit(a, true);
  CHECK(d.verdict == AcceptGuard::Verdict::Evict);
  CHECK(d.victim == a0);
  g.forget(a0);
  g.evicted();
  g.spoke(a1);  // a1 sent its first message: no longer evictable, no deadline
  CHECK(g.admit(a, true).verdict == AcceptGuard::Verdict::Admit);
  g.accepted(a0, a, 4 * kMs);
  accept(b, 5 * kMs);
  accept(b, 6 * kMs);
  accept(c, 7 * kMs);  // 6 unvouched: the budget
  CHECK(g.unvouched() == 6);
  // Over the budget: the oldest silent of any source (a2, at 3 ms).
  d = g.admit(c, true);
  CHECK(d.verdict == AcceptGuard::Verdict::Evict);
  CHECK(d.victim == a2);
  // Vouching frees budget: an owner's channel took a1.
  g.vouch(a1);
  CHECK(g.unvouched() == 5);
  CHECK(g.admit(c, true).verdict == AcceptGuard::Verdict::Admit);
  // No slot at all: refused, nothing evicted.
  CHECK(g.admit(c, false).verdict == AcceptGuard::Verdict::Refuse);
  g.refused(8 * kMs);
  CHECK(g.stats().refused == 1);
  // Deadlines: every silent one accepted before now - 100 ms.
  CHECK(g.next_deadline_ns() == 3 * kMs + 100 * kMs);
  AttentionMask<64> due;
  CHECK(g.expired(104 * kMs, due) == 2);  // a2 (3 ms) and a0 again (4 ms)
  CHECK(due.next(0) == a0);
  CHECK(due.next(a0 + 1) == a2);
  CHECK(g.stats().timed_out == 2);
}

TEST_CASE("accept guard: a source at its cap with nothing silent to evict is refused") {
  AcceptGuardConfig cfg;
  cfg.max_connections = 16;
  cfg.reserve = 0;
  cfg.per_source = 2;
  AcceptGuard g(cfg, "test listener");
  const auto a = source(9);
  for (std::uint32_t s = 0; s < 2; ++s) {
    REQUIRE(g.admit(a, true).verdict == AcceptGuard::Verdict::Admit);
    g.accepted(s, a, 1);
    g.spoke(s);  // talking, but not vouched for yet
  }
  CHECK(g.admit(a, true).verdict == AcceptGuard::Verdict::Refuse);
  CHECK(g.admit(source(10), true).verdict == AcceptGuard::Verdict::Admit);
}

TEST_CASE("rdma configuration: the connection manager's admission limits are checked") {
  rdma::RdmaConfig c;
  CHECK(c.validate() == Status::Ok);
  CHECK(c.hello_timeout_ms == 2000);
  c.hello_timeout_ms = 0;
  CHECK(c.validate() == Status::BadRequest);
  c = {};
  c.max_unvouched_per_source = 0;
  CHECK(c.validate() == Status::BadRequest);
  c = {};
  c.reserved_slots = rdma::kMaxConnections;
  CHECK(c.validate() == Status::BadRequest);
}
