// Memory windows (transport/rdma/memory_windows.h) on real rxe devices: a
// peer's RDMA WRITE reaches a buffer only through an open window's key, with
// the access the window grants, and never after the window closed; the MR
// under it, registered for binds only, grants nothing by itself. Every
// refused write fails at the NIC (a failed SendDone on the writer), and the
// protected bytes stay as they were.
//
// Not asserted: that an access past the window's end fails. The IBTA spec
// requires it and NICs check it, but rxe (kernel 6.1, rxe_resp.c
// check_rkey) checks a window access against the range of the window's MR,
// not of the window: on Soft-RoCE a window's key reaches its client's whole
// tx arena while it is open (docs/reliability.md, "Remote keys").
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <vector>

#include "tests/rdma/rdma_test_util.h"
#include "transport/rdma/memory_windows.h"

using namespace ferry;
using namespace ferry::transport;
using namespace ferry::transport::rdma;
using namespace ferry::transport::rdma::test;

namespace {

constexpr std::size_t kLen = 64 * 1024;

// A buffer on `t`'s PD registered for local write and window binds only.
struct BindOnly {
  std::byte* data = nullptr;
  ibv_mr* mr = nullptr;
  explicit BindOnly(RdmaTransport& t) {
    data = static_cast<std::byte*>(mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(data != MAP_FAILED);
    auto r = register_region(t.pd(), data, kLen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    REQUIRE(r.status == Status::Ok);
    mr = r.value;
  }
  ~BindOnly() {
    ibv_dereg_mr(mr);
    munmap(data, kLen);
  }
};

// b writes `n` bytes of 0x5A at `remote` (through conn b_conn); returns the
// writer's SendDone status, or the post's refusal (a zero rkey: rxe gives an
// MR without remote access none at all).
Status write_from_b(Pair& p, std::byte* src, MemoryHandle src_mh, wire::RemoteBuffer remote, std::uint64_t tag) {
  SendWr w{};
  w.conn = p.b_conn;
  w.op = WrOp::RdmaWriteImm;
  w.header.token = tag;
  w.payload = src;
  w.payload_len = remote.length;
  w.local = src_mh;
  w.remote = remote;
  w.user_data = tag;
  const PostResult posted = p.b->post_send(std::span<const SendWr>(&w, 1));
  if (posted.accepted != 1) return posted.status == Status::Ok ? Status::ProtocolError : posted.status;
  std::vector<Completion> got_a, got_b;
  Status st = Status::Ok;
  bool done = false;
  REQUIRE(pump_until(
      {{p.a.get(), &got_a}, {p.b.get(), &got_b}},
      [&] {
        for (auto& c : got_b) {
          if (c.kind == CompletionKind::SendDone && c.user_data == tag) done = true, st = c.status;
        }
        got_b.clear();
        got_a.clear();
        return done;
      },
      std::chrono::seconds(30)));
  return st;
}

struct Source {
  std::byte* data = nullptr;
  MemoryHandle mh{};
  RdmaTransport* t;
  explicit Source(RdmaTransport& tr) : t(&tr) {
    data = static_cast<std::byte*>(mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(data != MAP_FAILED);
    std::memset(data, 0x5A, kLen);
    auto r = tr.register_memory(data, kLen);
    REQUIRE(r.status == Status::Ok);
    mh = r.value;
  }
  ~Source() {
    (void)t->deregister_memory(mh);  // teardown: the test's checks are done
    munmap(data, kLen);
  }
};

// Binds and waits (bounded) until poll() reports the bind: what the daemon
// does before it sends the key.
Result<Window> open_now(MemoryWindows& w, ibv_mr* mr, std::byte* addr, std::uint32_t len, WindowAccess access) {
  static std::uint64_t cookie = 1000;
  const std::uint64_t mine = ++cookie;
  auto r = w.bind(mr, addr, len, access, mine);
  if (!r) return r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::array<WindowDone, 8> done;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::size_t n = w.poll(done);
    for (std::size_t i = 0; i < n; ++i) {
      if (done[i].cookie == mine) return done[i].ok ? r : Result<Window>::fail(Status::ProtocolError);
    }
  }
  return Result<Window>::fail(Status::Timeout);
}

// Unbinds and waits (bounded) until poll() reports it: the key is dead then.
bool close_now(MemoryWindows& w, Window win) {
  static std::uint64_t cookie = 5000;
  const std::uint64_t mine = ++cookie;
  w.unbind(win, mine);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::array<WindowDone, 8> done;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::size_t n = w.poll(done);
    for (std::size_t i = 0; i < n; ++i) {
      if (done[i].cookie == mine) return done[i].unbind;
    }
  }
  return false;
}

bool all(const std::byte* p, std::size_t n, std::byte v) {
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != v) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("rdma: a memory window admits writes to its range while open, and none after", "[rdma]") {
  Pair p = connect_pair();
  BindOnly dst(*p.a);
  Source src(*p.b);
  auto windows = MemoryWindows::create(p.a->pd(), 1, p.a->gid().index, 4);
  REQUIRE(windows.status == Status::Ok);
  auto w = open_now(*windows.value, dst.mr, dst.data + 4096, 8192, WindowAccess::RemoteWrite);
  REQUIRE(w.status == Status::Ok);
  CHECK(w.value.rkey != dst.mr->rkey);
  CHECK(windows.value->open_count() == 1);
  const wire::RemoteBuffer inside{reinterpret_cast<std::uint64_t>(dst.data + 4096), w.value.rkey, 8192};
  CHECK(write_from_b(p, src.data, src.mh, inside, 1) == Status::Ok);
  CHECK(all(dst.data + 4096, 8192, std::byte{0x5A}));
  CHECK(all(dst.data, 4096, std::byte{0}));
  CHECK(all(dst.data + 4096 + 8192, kLen - 4096 - 8192, std::byte{0}));
  REQUIRE(close_now(*windows.value, w.value));
  CHECK(windows.value->open_count() == 0);
  // The same key after close: refused by the NIC (the connection then fails).
  std::memset(dst.data + 4096, 0, 8192);
  CHECK(write_from_b(p, src.data, src.mh, inside, 2) != Status::Ok);
  CHECK(all(dst.data, kLen, std::byte{0}));
}

TEST_CASE("rdma: a read-only window, or the MR's own key, lets nothing be written", "[rdma]") {
  for (int variant = 0; variant < 2; ++variant) {
    INFO((variant == 0 ? "a window for remote read" : "the MR's own rkey, a write window open beside it"));
    Pair p = connect_pair();
    BindOnly dst(*p.a);
    Source src(*p.b);
    auto windows = MemoryWindows::create(p.a->pd(), 1, p.a->gid().index, 2);
    REQUIRE(windows.status == Status::Ok);
    auto w = open_now(*windows.value, dst.mr, dst.data, 4096,
                      variant == 0 ? WindowAccess::RemoteRead : WindowAccess::RemoteWrite);
    REQUIRE(w.status == Status::Ok);
    const std::uint32_t rkey = variant == 0 ? w.value.rkey : dst.mr->rkey;
    CHECK(write_from_b(p, src.data, src.mh, wire::RemoteBuffer{reinterpret_cast<std::uint64_t>(dst.data), rkey, 64},
                       3) != Status::Ok);
    CHECK(all(dst.data, kLen, std::byte{0}));
    CHECK(close_now(*windows.value, w.value));
  }
}

TEST_CASE("rdma: windows are reused with fresh keys; an exhausted pool says Busy", "[rdma]") {
  Pair p = connect_pair();
  BindOnly dst(*p.a);
  auto windows = MemoryWindows::create(p.a->pd(), 1, p.a->gid().index, 2);
  REQUIRE(windows.status == Status::Ok);
  auto w1 = open_now(*windows.value, dst.mr, dst.data, 64, WindowAccess::RemoteRead);
  auto w2 = open_now(*windows.value, dst.mr, dst.data + 64, 64, WindowAccess::RemoteWrite);
  REQUIRE(w1.status == Status::Ok);
  REQUIRE(w2.status == Status::Ok);
  CHECK(windows.value->bind(dst.mr, dst.data, 64, WindowAccess::RemoteRead, 1).status == Status::Busy);
  const std::uint32_t old = w2.value.rkey;
  REQUIRE(close_now(*windows.value, w2.value));
  auto w3 = open_now(*windows.value, dst.mr, dst.data + 128, 64, WindowAccess::RemoteWrite);
  REQUIRE(w3.status == Status::Ok);
  CHECK(w3.value.slot == w2.value.slot);
  CHECK(w3.value.rkey != old);  // a stale key never matches the reused window
  CHECK(close_now(*windows.value, w1.value));
  CHECK(close_now(*windows.value, w3.value));
  CHECK(windows.value->open_count() == 0);
}

TEST_CASE("rdma: binds and unbinds only post; their completions come from poll, in order", "[rdma]") {
  Pair p = connect_pair();
  BindOnly dst(*p.a);
  constexpr std::uint32_t kWindows = 64;
  auto windows = MemoryWindows::create(p.a->pd(), 1, p.a->gid().index, kWindows);
  REQUIRE(windows.status == Status::Ok);
  MemoryWindows& w = *windows.value;
  // Every window bound and unbound again, all posted before any completion
  // is looked at: no call waits for the device.
  // (Counted, not timed: a wall-clock bound on each call flaked under the
  // emulated VM, and pending() already says that no call consumed a completion.)
  std::vector<Window> open;
  for (std::uint32_t i = 0; i < kWindows; ++i) {
    const Result<Window> r = w.bind(dst.mr, dst.data + 64 * i, 64, WindowAccess::RemoteWrite, i + 1);
    REQUIRE(r.status == Status::Ok);
    open.push_back(r.value);
  }
  for (std::uint32_t i = 0; i < kWindows; ++i) w.unbind(open[i], 1000 + i + 1);
  CHECK(w.pending() == 2 * kWindows);  // nothing was waited for
  std::vector<WindowDone> seen;
  std::array<WindowDone, 16> batch;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (seen.size() < 2 * kWindows && std::chrono::steady_clock::now() < deadline) {
    const std::size_t n = w.poll(batch);
    seen.insert(seen.end(), batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(n));
  }
  REQUIRE(seen.size() == 2 * kWindows);
  for (std::uint32_t i = 0; i < kWindows; ++i) {  // post order: the binds, then the unbinds
    CHECK(seen[i].cookie == i + 1);
    CHECK_FALSE(seen[i].unbind);
    CHECK(seen[i].ok);
    CHECK(seen[kWindows + i].cookie == 1000 + i + 1);
    CHECK(seen[kWindows + i].unbind);
  }
  CHECK(w.pending() == 0);
  CHECK(w.open_count() == 0);
}
