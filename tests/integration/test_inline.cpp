// Inline deliveries through a real ferryd: a server process receives small
// messages and requests inside its CQ (no rx block, no ReleaseRx) and large
// ones in rx blocks, every one intact and in order; one that holds more
// small deliveries than its window gets the rest in blocks, and its
// releases (counted, not submitted) open the window again. The daemon's
// inline_deliveries counter agrees with the client's.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "shm/ring_entries.h"
#include "tests/integration/harness.h"

using namespace ferry;
using namespace ferry::itest;

namespace {

std::string pattern(std::size_t n, std::uint32_t seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (seed * 7 + i) % 26);
  return s;
}

// Sends `payload` to `ep` and returns every completion until both the
// delivery and the OpDone came (the delivery is returned, unreleased).
bool roundtrip(Client& c, EndpointId ep, const std::string& payload, std::uint64_t ud, Completion& delivery) {
  Buffer b = c.alloc(payload.size());
  if (!b) return false;
  std::memcpy(b.data, payload.data(), payload.size());
  if (c.send(ep, b, static_cast<std::uint32_t>(payload.size()), ud) != Status::Ok) return false;
  bool delivered = false, done = false;
  const auto deadline = Clock::now() + 5s;
  while (!(delivered && done) && Clock::now() < deadline) {
    Completion out[4];
    const std::size_t n = c.wait(out, 100ms);
    for (std::size_t k = 0; k < n; ++k) {
      if (out[k].kind == Completion::Kind::Message) {
        delivery = out[k];
        delivered = true;
      } else if (out[k].kind == Completion::Kind::OpDone && out[k].user_data == ud) {
        done = out[k].status == Status::Ok;
        if (!done) return false;
      }
    }
  }
  (void)c.free(b);
  return delivered && done;
}

bool is_inline(const Completion& d) { return d.rx_capacity == 0 && d.rx_offset == 0; }

}  // namespace

TEST_CASE("small deliveries come inline, large ones in blocks, every byte intact") {
  Daemon d;
  auto c = attach_retry(d.socket(), "inline", 5s);
  REQUIRE(c);
  REQUIRE(c->serve("inl", 5s));
  auto ep = c->open("inl", 5s);
  REQUIRE(ep);
  const std::size_t sizes[] = {1, 63, 64, 65, 128, shm::kInlineMaxBytes, shm::kInlineMaxBytes + 1, 4096, 100};
  std::uint64_t inlined = 0;
  std::uint32_t i = 0;
  for (std::size_t n : sizes) {
    INFO("payload of " << n << " bytes");
    const std::string p = pattern(n, i);
    Completion m;
    REQUIRE(roundtrip(*c, ep.value, p, ++i, m));
    REQUIRE(m.length == n);
    CHECK(std::memcmp(m.data, p.data(), n) == 0);
    CHECK(is_inline(m) == (n <= shm::kInlineMaxBytes));
    CHECK(m.caller == Completion::Caller::Local);
    inlined += is_inline(m) ? 1 : 0;
    c->release(m);
  }
  CHECK(c->stats().inline_deliveries == inlined);
  CHECK(c->stats().release_failures == 0);
  CHECK(d.status_number("inline_deliveries") == static_cast<long>(inlined));
}

TEST_CASE("past its inline window a client gets blocks; its releases open the window again") {
  Daemon d;
  AttachOptions o;
  o.socket_path = d.socket();
  o.name = "window";
  o.cq_entries = 64;  // a window of 16
  auto r = Client::attach(o);
  REQUIRE(r.status == Status::Ok);
  Client& c = *r.value;
  const std::uint32_t window = shm::inline_window(64);
  REQUIRE(c.serve("win", 5s));
  auto ep = c.open("win", 5s);
  REQUIRE(ep);
  std::vector<Completion> held;
  for (std::uint32_t i = 0; i < window + 8; ++i) {
    Completion m;
    REQUIRE(roundtrip(c, ep.value, pattern(32, i), i + 1, m));
    CHECK(std::memcmp(m.data, pattern(32, i).data(), 32) == 0);
    CHECK(is_inline(m) == (i < window));
    held.push_back(m);
  }
  // The held inline payloads are still as delivered.
  for (std::uint32_t i = 0; i < window; ++i) CHECK(std::memcmp(held[i].data, pattern(32, i).data(), 32) == 0);
  for (const Completion& m : held) c.release(m);
  // The window is open again: the next deliveries are inline.
  for (std::uint32_t i = 0; i < 4; ++i) {
    Completion m;
    REQUIRE(roundtrip(c, ep.value, pattern(40, 100 + i), 1000 + i, m));
    CHECK(is_inline(m));
    c.release(m);
  }
  CHECK(c.stats().release_failures == 0);
  CHECK(c.stats().dropped_completions == 0);
}
