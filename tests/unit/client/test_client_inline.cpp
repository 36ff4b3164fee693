// libferry's side of inline deliveries (shm::kCqFlagInline) against a
// scripted daemon (fake_daemon.h): the payload is copied out of the ring,
// also when it wraps the ring's end or was not popped with its entry, it
// stays valid until release(), and release() counts it in the CQ header
// instead of submitting a ReleaseRx; a double release is refused; a daemon
// that posts past its window loses that delivery, not the client's memory;
// a malformed inline entry stops the client reading a ring it can no
// longer parse.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "ferry/client.h"
#include "ferry/ferry.h"
#include "tests/unit/client/fake_daemon.h"

using namespace ferry;
using ferry::test::FakeDaemon;

namespace {

std::unique_ptr<Client> attach_to(FakeDaemon& d) {
  auto c = ferry::test::attach_client(d, "inline");
  REQUIRE(c);
  return c;
}

shm::CqEntry inline_entry(shm::CqKind kind, std::uint32_t length) {
  shm::CqEntry c{};
  c.kind = static_cast<std::uint8_t>(kind);
  c.flags = shm::kCqFlagInline;
  c.handle = 5;
  c.length = length;
  c.token = 0xabc;
  c.source = 77;
  c.caller_flags = shm::kCallerLocal;
  c.caller_uid = 1000;
  return c;
}

// Posts an inline delivery of `payload` the way ferryd does.
void post(FakeDaemon& d, shm::CqKind kind, const std::string& payload) {
  REQUIRE(d.cq().try_push_record(inline_entry(kind, static_cast<std::uint32_t>(payload.size())),
                                 reinterpret_cast<const std::byte*>(payload.data()),
                                 static_cast<std::uint32_t>(payload.size())));
  if (d.cq().claim_doorbell()) d.ring_cq();
}

std::string pattern(std::size_t n, char first) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(first + i % 23);
  return s;
}

std::uint32_t released(FakeDaemon& d) { return d.view().cq_header->released.load(); }

}  // namespace

TEST_CASE("inline deliveries are copied out, across the ring's end too, and released by counting") {
  FakeDaemon d;
  auto c = attach_to(d);
  // Move the ring near its end with plain deliveries (released normally).
  const std::uint32_t cap = d.cq().capacity();
  for (std::uint32_t i = 0; i + 2 < cap; ++i) {
    shm::CqEntry e{};
    e.kind = static_cast<std::uint8_t>(shm::CqKind::Message);
    e.handle = 5;
    e.offset = d.view().layout.rx_offset;
    e.length = 1;
    e.capacity = 64;
    d.complete(e);
    Completion one[1];
    REQUIRE(c->poll(one) == 1);
  }
  // Entry in the second-to-last slot, its three payload slots wrapping.
  const std::string big = pattern(shm::kInlineMaxBytes, 'a');
  post(d, shm::CqKind::Message, big);
  const std::string small = pattern(5, 'A');
  post(d, shm::CqKind::Request, small);
  Completion out[4];
  REQUIRE(c->poll(out) == 2);
  CHECK(out[0].kind == Completion::Kind::Message);
  REQUIRE(out[0].length == big.size());
  CHECK(std::memcmp(out[0].data, big.data(), big.size()) == 0);
  CHECK(out[0].rx_offset == 0);
  CHECK(out[0].rx_capacity == 0);
  CHECK(out[0].caller == Completion::Caller::Local);
  CHECK(out[0].caller_uid == 1000);
  CHECK(out[1].kind == Completion::Kind::Request);
  CHECK(out[1].token == 0xabc);
  REQUIRE(out[1].length == 5);
  CHECK(std::memcmp(out[1].data, small.data(), 5) == 0);
  CHECK(c->stats().inline_deliveries == 2);

  // The daemon reuses the ring slots: the copies stay as they were.
  post(d, shm::CqKind::Message, pattern(shm::kInlineMaxBytes, 'z'));
  CHECK(std::memcmp(out[0].data, big.data(), big.size()) == 0);

  // Released by counting, no ReleaseRx; a second release is refused.
  c->release(out[0]);
  CHECK(released(d) == 1);
  shm::SqEntry sqe;
  CHECK(d.sq().pop_batch(&sqe, 1) == 0);
  c->release(out[0]);
  CHECK(released(d) == 1);
  CHECK(c->stats().release_failures == 1);
  c->release(out[1]);
  CHECK(released(d) == 2);
  CHECK(d.sq().pop_batch(&sqe, 1) == 0);
}

TEST_CASE("an inline payload not popped with its entry is read from the ring") {
  FakeDaemon d;
  auto c = attach_to(d);
  const std::string a = pattern(130, 'a'), b = pattern(64, 'b');
  post(d, shm::CqKind::Message, a);
  post(d, shm::CqKind::Message, b);
  Completion one[1];
  REQUIRE(c->poll(one) == 1);  // a batch of one entry: the payload follows from the ring
  REQUIRE(one[0].length == a.size());
  CHECK(std::memcmp(one[0].data, a.data(), a.size()) == 0);
  Completion two[1];
  REQUIRE(c->poll(two) == 1);
  REQUIRE(two[0].length == b.size());
  CHECK(std::memcmp(two[0].data, b.data(), b.size()) == 0);
  CHECK(one[0].data != two[0].data);
  CHECK(c->poll(two) == 0);
}

TEST_CASE("a daemon past its inline window loses that delivery, and the client goes on") {
  FakeDaemon d;
  auto c = attach_to(d);
  const std::uint32_t window = shm::inline_window(d.cq().capacity());
  std::vector<Completion> held;
  Completion out[16];
  for (std::uint32_t i = 0; i <= window; ++i) {
    post(d, shm::CqKind::Message, "m" + std::to_string(i));
    const std::size_t n = c->poll(out);
    held.insert(held.end(), out, out + n);
  }
  CHECK(held.size() == window);
  CHECK(c->stats().dropped_completions == 1);
  CHECK(c->state() == Status::Ok);
  c->release(held[0]);
  post(d, shm::CqKind::Message, "again");
  REQUIRE(c->poll(out) == 1);
  REQUIRE(out[0].length == 5);
  CHECK(std::memcmp(out[0].data, "again", 5) == 0);
}

TEST_CASE("a malformed inline entry stops the client reading the CQ") {
  FakeDaemon d;
  auto c = attach_to(d);
  shm::CqEntry bad = inline_entry(shm::CqKind::Message, shm::kInlineMaxBytes + 1);
  d.complete(bad);
  Completion out[4];
  CHECK(c->poll(out) == 0);
  CHECK(c->state() == Status::DaemonGone);
  // Nothing after it is read.
  post(d, shm::CqKind::Message, "later");
  CHECK(c->poll(out) == 0);
}

TEST_CASE("the C API releases an inline delivery by counting it") {
  FakeDaemon d;
  ferry_client* c = ferry::test::attach_c_client(d, "inline-c");
  REQUIRE(c != nullptr);
  post(d, shm::CqKind::Message, "via C");
  ferry_completion out[2];
  REQUIRE(ferry_poll(c, out, 2) == 1);
  REQUIRE(out[0].length == 5);
  CHECK(std::memcmp(out[0].data, "via C", 5) == 0);
  ferry_release(c, &out[0]);
  CHECK(released(d) == 1);
  shm::SqEntry sqe;
  CHECK(d.sq().pop_batch(&sqe, 1) == 0);
  ferry_detach(c);
}
