// libferry against a scripted daemon (fake_daemon.h): the exact SQ entries
// it submits, how it matches and validates completions, deferred releases,
// blocking control ops that stash other completions, and daemon hang-up.
#include <sys/epoll.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

#include "ferry/client.h"
#include "ferry/ferry.h"
#include "tests/unit/client/fake_daemon.h"

using namespace ferry;
using ferry::test::FakeDaemon;

namespace {

std::unique_ptr<Client> attach_to(FakeDaemon& d, bool busy_poll = false) {
  auto c = ferry::test::attach_client(d, "unit", busy_poll);
  REQUIRE(c);
  return c;
}

shm::SqEntry pop_one(FakeDaemon& d) {
  shm::SqEntry e{};
  REQUIRE(d.sq().pop_batch(&e, 1) == 1);
  return e;
}

shm::CqEntry done_for(const shm::SqEntry& e, Status s = Status::Ok) {
  shm::CqEntry c{};
  c.kind = static_cast<std::uint8_t>(shm::CqKind::OpDone);
  c.status = static_cast<std::uint8_t>(s);
  c.op = e.op;
  c.user_data = e.user_data;
  return c;
}

shm::CqEntry delivery(FakeDaemon& d, shm::CqKind kind, std::uint64_t at, std::uint32_t len, std::uint32_t cap) {
  shm::CqEntry c{};
  c.kind = static_cast<std::uint8_t>(kind);
  c.handle = 5;
  c.offset = d.view().layout.rx_offset + at;
  c.length = len;
  c.capacity = cap;
  c.token = 0xabc;
  c.source = 77;
  return c;
}

// The client sleeps in wait(); the fake daemon delivers one message (at rx
// offset `at`) once the client has announced the sleep, as ferryd would.
// Returns what wait() returned.
std::size_t wait_for_delivery_after_announce(FakeDaemon& d, Client& c, std::uint64_t at) {
  std::thread t([&] {
    while (d.view().cq_header->consumer_waiting.load() == 0) std::this_thread::yield();
    d.complete(delivery(d, shm::CqKind::Message, at, 1, 64));
  });
  Completion out[2];
  const std::size_t n = c.wait(out, std::chrono::seconds(5));
  t.join();
  return n;
}

}  // namespace

TEST_CASE("attach maps the segment and reports ids") {
  FakeDaemon d;
  auto c = attach_to(d);
  CHECK(c->client_id() == 42);
  CHECK(c->daemon_epoch() == 7);
  CHECK(c->state() == Status::Ok);
  CHECK(c->max_message_bytes() == (1u << 20));
  CHECK(c->event_fd() >= 0);
}

TEST_CASE("tx buffers come from the tx arena and free validates") {
  FakeDaemon d;
  auto c = attach_to(d);
  Buffer a = c->alloc(100);
  REQUIRE(a);
  CHECK(a.capacity >= 100);
  CHECK(a.offset >= d.view().layout.tx_offset);
  CHECK(a.offset + a.capacity <= d.view().layout.tx_offset + d.view().layout.tx_bytes);
  CHECK_FALSE(c->alloc(0));
  CHECK_FALSE(c->alloc((1u << 20) + 1));
  CHECK(c->free(a) == Status::Ok);
  CHECK(c->free(a) == Status::BadRequest);  // double free
  CHECK(c->free(Buffer{}) == Status::BadRequest);
}

TEST_CASE("send builds the entry and its OpDone returns the user's user_data") {
  FakeDaemon d;
  auto c = attach_to(d);
  Buffer b = c->alloc(4096);
  REQUIRE(b);
  CHECK(c->send(9, b, 0, 1) == Status::BadRequest);
  CHECK(c->send(9, b, b.capacity + 1, 1) == Status::BadRequest);
  Buffer forged = b;
  forged.offset += 64;  // pointer and offset disagree
  CHECK(c->send(9, forged, 10, 1) == Status::BadRequest);
  REQUIRE(c->send(9, b, 1000, 0x1234) == Status::Ok);
  shm::SqEntry e = pop_one(d);
  CHECK(e.op == static_cast<std::uint8_t>(shm::Op::Send));
  CHECK(e.flags == 0);
  CHECK(e.handle == 9);
  CHECK(e.offset == b.offset);
  CHECK(e.length == 1000);
  CHECK(e.user_data != 0x1234);  // the slot token travels, not the user's value

  Completion out[4];
  CHECK(c->poll(out) == 0);
  // A forged completion (unknown token) is dropped; the real one comes through once.
  shm::CqEntry bogus = done_for(e);
  bogus.user_data ^= 1ull << 40;
  d.complete(bogus);
  d.complete(done_for(e));
  d.complete(done_for(e));  // replay: the slot is no longer live
  REQUIRE(c->poll(out) == 1);
  CHECK(out[0].kind == Completion::Kind::OpDone);
  CHECK(out[0].op == OpKind::Send);
  CHECK(out[0].status == Status::Ok);
  CHECK(out[0].user_data == 0x1234);
  CHECK(c->poll(out) == 0);
  CHECK(c->stats().dropped_completions == 2);
}

TEST_CASE("call response lengths are checked against the caller's buffer") {
  FakeDaemon d;
  auto c = attach_to(d);
  Buffer req = c->alloc(64), resp = c->alloc(256);
  REQUIRE(c->call(3, req, 64, resp, 11) == Status::Ok);
  REQUIRE(c->call(3, req, 64, resp, 12) == Status::Ok);
  shm::SqEntry e1 = pop_one(d), e2 = pop_one(d);
  CHECK(e1.resp_offset == resp.offset);
  CHECK(e1.resp_length == resp.capacity);
  shm::CqEntry c1 = done_for(e1);
  c1.length = 200;
  shm::CqEntry c2 = done_for(e2);
  c2.length = resp.capacity + 1;  // claims to have written past the buffer
  d.complete(c1);
  d.complete(c2);
  Completion out[4];
  REQUIRE(c->poll(out) == 2);
  CHECK(out[0].user_data == 11);
  CHECK(out[0].status == Status::Ok);
  CHECK(out[0].length == 200);
  CHECK(out[0].data == resp.data);
  CHECK(out[1].user_data == 12);
  CHECK(out[1].status == Status::ProtocolError);
}

TEST_CASE("deliveries outside the rx arena are dropped; release is quiet") {
  FakeDaemon d;
  auto c = attach_to(d);
  const auto& l = d.view().layout;
  std::memcpy(d.view().at(l.rx_offset + 128), "hello", 5);
  d.complete(delivery(d, shm::CqKind::Message, 128, 5, 64));
  shm::CqEntry outside = delivery(d, shm::CqKind::Message, 0, 5, 64);
  outside.offset = l.tx_offset;  // into the tx arena
  d.complete(outside);
  shm::CqEntry past = delivery(d, shm::CqKind::Request, l.rx_bytes - 32, 5, 64);  // runs off the end
  d.complete(past);
  shm::CqEntry huge = delivery(d, shm::CqKind::Request, 0, 5, 64);
  huge.offset = UINT64_MAX - 16;
  d.complete(huge);
  shm::CqEntry longer = delivery(d, shm::CqKind::Request, 0, 65, 64);  // length > capacity
  d.complete(longer);
  d.complete(delivery(d, shm::CqKind::Request, 4096, 3, 64));

  Completion out[8];
  REQUIRE(c->poll(out) == 2);
  CHECK(out[0].kind == Completion::Kind::Message);
  CHECK(out[0].length == 5);
  CHECK(std::memcmp(out[0].data, "hello", 5) == 0);
  CHECK(out[0].source == 77);
  CHECK(out[1].kind == Completion::Kind::Request);
  CHECK(out[1].token == 0xabc);
  CHECK(c->stats().dropped_completions == 4);

  c->release(out[0]);
  shm::SqEntry r = pop_one(d);
  CHECK(r.op == static_cast<std::uint8_t>(shm::Op::ReleaseRx));
  CHECK(r.flags == shm::kSqFlagQuiet);
  CHECK(r.offset == l.rx_offset + 128);

  // The daemon rejecting a quiet release is counted, not surfaced.
  shm::CqEntry rejected{};
  rejected.kind = static_cast<std::uint8_t>(shm::CqKind::OpDone);
  rejected.status = static_cast<std::uint8_t>(Status::BadRequest);
  rejected.op = static_cast<std::uint8_t>(shm::Op::ReleaseRx);
  rejected.user_data = UINT64_MAX;
  d.complete(rejected);
  CHECK(c->poll(out) == 0);
  CHECK(c->stats().release_failures == 1);
}

TEST_CASE("the C API forwards to the same client") {
  FakeDaemon d;
  ferry_client* c = ferry::test::attach_c_client(d, "c-api");
  REQUIRE(c != nullptr);
  CHECK(ferry_state(c) == FERRY_OK);
  CHECK(ferry_event_fd(c) >= 0);
  ferry_buffer b{};
  REQUIRE(ferry_alloc(c, 256, &b) == FERRY_OK);
  REQUIRE(b.data != nullptr);
  CHECK(ferry_send(c, 4, &b, 0, 1) == static_cast<int>(Status::BadRequest));
  REQUIRE(ferry_send(c, 4, &b, 200, 55) == FERRY_OK);
  shm::SqEntry e = pop_one(d);
  CHECK(e.length == 200);
  d.complete(done_for(e));
  d.complete(delivery(d, shm::CqKind::Message, 0, 8, 64));
  ferry_completion out[4];
  REQUIRE(ferry_wait(c, out, 4, 2000) == 2);
  CHECK(out[0].kind == FERRY_OP_DONE);
  CHECK(out[0].user_data == 55);
  CHECK(out[1].kind == FERRY_MESSAGE);
  CHECK(out[1].length == 8);
  ferry_release(c, &out[1]);
  shm::SqEntry rel = pop_one(d);
  CHECK(rel.op == static_cast<std::uint8_t>(shm::Op::ReleaseRx));
  CHECK(rel.offset == out[1].rx_offset);
  CHECK(ferry_free(c, &b) == FERRY_OK);
  CHECK(ferry_free(c, &b) == static_cast<int>(Status::BadRequest));
  // Busy polling: empty polls leave the CQ unannounced; switched off, they announce.
  CHECK(ferry_set_busy_poll(nullptr, 1) == static_cast<int>(Status::BadRequest));
  REQUIRE(ferry_set_busy_poll(c, 1) == FERRY_OK);
  CHECK(ferry_poll(c, out, 4) == 0);
  CHECK(d.view().cq_header->consumer_waiting.load() == 0);
  REQUIRE(ferry_set_busy_poll(c, 0) == FERRY_OK);
  CHECK(ferry_poll(c, out, 4) == 0);
  CHECK(d.view().cq_header->consumer_waiting.load() == 1);
  ferry_detach(c);
}

TEST_CASE("spans: whole slabs side by side, at most half the tx arena, an eighth of it kept free") {
  FakeDaemon d;  // an 8 MiB tx arena of 1 MiB slabs
  auto c = attach_to(d);
  constexpr std::size_t kMiB = 1u << 20;
  CHECK_FALSE(c->alloc_span(4 * kMiB + 1));  // past half the arena
  Buffer a = c->alloc_span(3 * kMiB - 100);
  REQUIRE(a);
  CHECK(a.capacity == 3 * kMiB);
  std::memset(a.data, 0xA5, a.capacity);  // every byte of it is ours, in the mapping
  Buffer b = c->alloc_span(3 * kMiB);
  REQUIRE(b);  // 2 slabs stay free: the floor of the reserve
  CHECK((b.offset >= a.offset + a.capacity || a.offset >= b.offset + b.capacity));
  CHECK_FALSE(c->alloc_span(kMiB + 1));  // it would leave less than 2 slabs
  Buffer small = c->alloc(64);
  CHECK(small);  // the reserve is there for the calls that fill the spans
  CHECK(c->free(small) == Status::Ok);
  CHECK(c->free(b) == Status::Ok);
  CHECK(c->free(a) == Status::Ok);
  FakeDaemon d2;
  ferry_client* cc = ferry::test::attach_c_client(d2, "c-span");
  REQUIRE(cc != nullptr);
  ferry_buffer s{};
  CHECK(ferry_alloc_span(cc, 4 * kMiB + 1, &s) == static_cast<int>(Status::NoMemory));
  CHECK(s.data == nullptr);
  CHECK(ferry_alloc_span(nullptr, kMiB, &s) == static_cast<int>(Status::BadRequest));
  REQUIRE(ferry_alloc_span(cc, 2 * kMiB + 1, &s) == FERRY_OK);
  CHECK(s.capacity == 3 * kMiB);
  CHECK(ferry_free(cc, &s) == FERRY_OK);
  ferry_detach(cc);
}

TEST_CASE("a full SQ gives Busy, and releases queue until there is room") {
  FakeDaemon d;
  auto c = attach_to(d);
  Buffer b = c->alloc(64);
  std::uint32_t sent = 0;
  while (c->send(1, b, 8, sent) == Status::Ok) ++sent;
  CHECK(sent == d.view().sq_capacity);
  CHECK(c->send(1, b, 8, 0) == Status::Busy);
  // A release while full is kept privately, then flushed by the next poll.
  d.complete(delivery(d, shm::CqKind::Message, 0, 8, 64));
  Completion out[4];
  REQUIRE(c->poll(out) == 1);
  c->release(out[0]);
  shm::SqEntry first = pop_one(d);
  CHECK(first.op == static_cast<std::uint8_t>(shm::Op::Send));
  CHECK(c->poll(out) == 0);  // flushes the release into the freed slot
  shm::SqEntry drained[512];
  const std::uint32_t n = d.sq().pop_batch(drained, 512);
  REQUIRE(n == d.view().sq_capacity);
  CHECK(drained[n - 1].op == static_cast<std::uint8_t>(shm::Op::ReleaseRx));
  CHECK(drained[n - 1].offset == d.view().layout.rx_offset);
  CHECK(c->stats().deferred_releases == 1);
}

TEST_CASE("blocking serve stashes unrelated completions for poll") {
  FakeDaemon d;
  auto c = attach_to(d);
  std::thread daemon([&] {
    shm::SqEntry e{};
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (d.sq().pop_batch(&e, 1) == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    if (e.op != static_cast<std::uint8_t>(shm::Op::Serve)) return;
    std::string name(reinterpret_cast<const char*>(d.view().at(e.offset)), e.length);
    if (name != "echo") return;
    d.complete(delivery(d, shm::CqKind::Message, 0, 1, 64));  // arrives before the answer
    shm::CqEntry done = done_for(e);
    done.handle = 17;
    d.complete(done);
  });
  auto r = c->serve("echo", std::chrono::seconds(5));
  daemon.join();
  REQUIRE(r.status == Status::Ok);
  CHECK(r.value == 17);
  Completion out[4];
  REQUIRE(c->poll(out) == 1);
  CHECK(out[0].kind == Completion::Kind::Message);
  CHECK(c->serve("bad name!").status == Status::BadRequest);
  CHECK(c->open("host:99999/x").status == Status::BadRequest);
}

TEST_CASE("a control op with no answer times out") {
  FakeDaemon d;
  auto c = attach_to(d);
  auto t0 = std::chrono::steady_clock::now();
  CHECK(c->open("svc", std::chrono::milliseconds(50)).status == Status::Timeout);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(50));
  // The late answer is swallowed, not surfaced.
  shm::SqEntry e = pop_one(d);
  shm::CqEntry done = done_for(e);
  done.handle = 3;
  d.complete(done);
  Completion out[2];
  CHECK(c->poll(out) == 0);
}

TEST_CASE("wait wakes on the CQ doorbell and times out without work") {
  FakeDaemon d;
  auto c = attach_to(d);
  Completion out[2];
  auto t0 = std::chrono::steady_clock::now();
  CHECK(c->wait(out, std::chrono::milliseconds(30)) == 0);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(30));
  CHECK(wait_for_delivery_after_announce(d, *c, 0) == 1);
  // event_fd is readable once a completion is pushed after poll() returned 0.
  CHECK(c->poll(out) == 0);
  d.complete(delivery(d, shm::CqKind::Message, 64, 1, 64));
  epoll_event ev;
  CHECK(::epoll_wait(c->event_fd(), &ev, 1, 2000) == 1);
  CHECK(c->poll(out) == 1);
}

TEST_CASE("a busy_poll client's empty polls ask for no doorbell; its wait() still sleeps on one") {
  FakeDaemon d;
  auto c = attach_to(d, true);
  Completion out[2];
  for (int i = 0; i < 100; ++i) CHECK(c->poll(out) == 0);
  CHECK(d.view().cq_header->consumer_waiting.load() == 0);  // the daemon would not ring
  d.complete(delivery(d, shm::CqKind::Message, 0, 1, 64));
  CHECK(c->poll(out) == 1);
  CHECK(wait_for_delivery_after_announce(d, *c, 64) == 1);
  // And the plain client, for contrast: an empty poll announces.
  FakeDaemon d2;
  auto plain = attach_to(d2);
  CHECK(plain->poll(out) == 0);
  CHECK(d2.view().cq_header->consumer_waiting.load() == 1);
}

TEST_CASE("once the daemon claimed the announcement (it rang), the next sleep announces again") {
  FakeDaemon d;
  auto c = attach_to(d);
  Completion out[2];
  CHECK(c->poll(out) == 0);  // announces
  REQUIRE(d.view().cq_header->consumer_waiting.load() == 1);
  // The daemon publishes and claims the announcement (as ferryd does when it rings).
  d.complete(delivery(d, shm::CqKind::Message, 0, 1, 64));
  CHECK(d.view().cq_header->consumer_waiting.load() == 0);
  CHECK(c->poll(out) == 1);
  // Sleeping again announces again, so the next completion rings.
  CHECK(wait_for_delivery_after_announce(d, *c, 64) == 1);
}

TEST_CASE("daemon hang-up completes every in-flight op with DaemonGone exactly once") {
  FakeDaemon d;
  auto c = attach_to(d);
  Buffer b = c->alloc(64), resp = c->alloc(64);
  for (std::uint64_t i = 0; i < 10; ++i) REQUIRE(c->send(1, b, 8, i) == Status::Ok);
  for (std::uint64_t i = 10; i < 15; ++i) REQUIRE(c->call(1, b, 8, resp, i) == Status::Ok);
  shm::SqEntry e = pop_one(d);
  d.complete(done_for(e));  // op 0 finished before the daemon died
  d.hang_up();
  Completion out[32];
  std::size_t n = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (n < 15 && std::chrono::steady_clock::now() < deadline)
    n += c->wait({out + n, 32 - n}, std::chrono::milliseconds(100));
  REQUIRE(n == 15);
  CHECK(out[0].user_data == 0);
  CHECK(out[0].status == Status::Ok);
  bool seen[15] = {};
  for (std::size_t i = 1; i < n; ++i) {
    CHECK(out[i].status == Status::DaemonGone);
    REQUIRE(out[i].user_data < 15);
    CHECK_FALSE(seen[out[i].user_data]);
    seen[out[i].user_data] = true;
  }
  CHECK(c->wait(out, std::chrono::milliseconds(20)) == 0);
  CHECK(c->state() == Status::DaemonGone);
  CHECK(c->send(1, b, 8, 99) == Status::DaemonGone);
  CHECK(c->open("x").status == Status::DaemonGone);
}
