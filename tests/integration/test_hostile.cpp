// (d) Hostile clients: one that writes garbage and every kind of invalid
// entry into its SQ and floods it without reading its CQ, and one that
// publishes a corrupt SQ head. The daemon must answer each bad entry with a
// status, disconnect the corrupt one, and keep serving a well-behaved pair
// (checksummed traffic) the whole time.
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "tests/integration/raw_client.h"
#include "tests/integration/traffic.h"

using namespace ferry;
using namespace ferry::itest;

namespace {

shm::SqEntry entry(shm::Op op, std::uint64_t ud) {
  shm::SqEntry e{};
  e.op = static_cast<std::uint8_t>(op);
  e.user_data = ud;
  return e;
}

// Submits `e`, waits for its OpDone (other completions go to `side`).
bool roundtrip(RawClient& r, const shm::SqEntry& e, shm::CqEntry& done, std::vector<shm::CqEntry>& side) {
  if (!r.submit(e)) return false;
  const auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline) {
    shm::CqEntry got[16];
    const std::uint32_t n = r.reap(got, 16, 100);
    bool found = false;
    for (std::uint32_t i = 0; i < n; ++i) {
      if (got[i].kind == static_cast<std::uint8_t>(shm::CqKind::OpDone) && got[i].user_data == e.user_data && !found) {
        done = got[i];
        found = true;
      } else {
        side.push_back(got[i]);
      }
    }
    if (found) return true;
  }
  return false;
}

const char* st(std::uint8_t s) { return s <= kMaxStatus ? to_string(static_cast<Status>(s)).data() : "?"; }

int hostile(const std::string& socket) {
  RawClient r(socket, "hostile");
  if (!r.ok()) return fail(1, "raw attach");
  const auto& l = r.view().layout;
  const std::uint64_t tx = l.tx_offset, rx = l.rx_offset;
  std::byte* base = r.view().base;
  std::vector<shm::CqEntry> side;
  shm::CqEntry done{};

  // A service of its own, and an endpoint to it, for the stateful cases.
  const char name[] = "hostile-svc";
  std::memcpy(base + tx, name, sizeof name - 1);
  shm::SqEntry serve = entry(shm::Op::Serve, 1);
  serve.offset = tx;
  serve.length = sizeof name - 1;
  if (!roundtrip(r, serve, done, side) || done.status != 0) return fail(2, "serve: %s", st(done.status));
  const std::uint32_t service = done.handle;
  shm::SqEntry open = entry(shm::Op::Open, 2);
  open.offset = tx;
  open.length = sizeof name - 1;
  if (!roundtrip(r, open, done, side) || done.status != 0) return fail(3, "open: %s", st(done.status));
  const std::uint32_t ep = done.handle;
  const std::uint64_t payload = tx + 4096;
  std::memset(base + payload, 0x42, 4096);

  // Every invalid entry, with the status OPS.md promises for it.
  std::map<std::uint64_t, Status> expect;
  std::vector<shm::SqEntry> bad;
  auto add = [&](shm::SqEntry e, Status s) {
    e.user_data = 100 + bad.size();
    expect[e.user_data] = s;
    bad.push_back(e);
  };
  auto send_at = [&](std::uint64_t off, std::uint32_t len) {
    shm::SqEntry e = entry(shm::Op::Send, 0);
    e.handle = ep;
    e.offset = off;
    e.length = len;
    return e;
  };
  const Status B = Status::BadRequest;
  for (std::uint8_t op : {std::uint8_t{9}, std::uint8_t{100}, std::uint8_t{255}}) {
    shm::SqEntry e{};
    e.op = op;
    add(e, B);
  }
  for (std::uint8_t flags : {std::uint8_t{2}, std::uint8_t{0x80}, shm::kSqFlagQuiet}) {
    shm::SqEntry e = entry(shm::Op::Nop, 0);
    e.flags = flags;
    add(e, B);
  }
  {
    shm::SqEntry e = entry(shm::Op::Nop, 0);
    e.reserved0 = 1;
    add(e, B);
  }
  {
    shm::SqEntry e = entry(shm::Op::Nop, 0);
    e.reserved2 = 1;
    add(e, B);
  }
  {
    shm::SqEntry e = entry(shm::Op::Nop, 0);
    e.reserved1 = ~0ull;
    add(e, B);
  }
  {
    shm::SqEntry e = entry(shm::Op::Nop, 0);
    e.timeout_ms = 100;  // only a Call has a timeout
    add(e, B);
  }
  {
    shm::SqEntry e = send_at(payload, 64);
    e.flags = shm::kSqFlagQuiet;
    add(e, B);
  }
  add(send_at(rx, 64), B);                    // into the rx arena
  add(send_at(l.segment_bytes - 10, 64), B);  // past the segment
  add(send_at(l.segment_bytes, 1), B);
  add(send_at(UINT64_MAX - 8, 64), B);  // wraps around
  add(send_at(UINT64_MAX, UINT32_MAX), B);
  add(send_at(payload, 0), B);  // empty
  add(send_at(payload, static_cast<std::uint32_t>(r.max_message()) + 1), B);
  add(send_at(tx + l.tx_bytes - 8, 64), B);  // straddles the tx end
  add(send_at(0, 64), B);                    // the segment header
  add(send_at(l.sq_entries_offset, 64), B);  // its own rings
  {
    shm::SqEntry e = send_at(payload, 64);
    e.op = static_cast<std::uint8_t>(shm::Op::Call);
    e.resp_offset = rx;
    e.resp_length = 64;
    add(e, B);
    e.resp_offset = UINT64_MAX - 100;
    e.resp_length = 200;
    add(e, B);
    e.resp_offset = payload;
    e.resp_length = UINT32_MAX;
    add(e, B);
  }
  std::memcpy(base + payload + 8192, "bad name!", 9);
  for (std::uint32_t len : {0u, 65u, 9u}) {
    shm::SqEntry e = entry(shm::Op::Serve, 0);
    e.offset = len == 9 ? payload + 8192 : payload;
    e.length = len;
    add(e, B);
  }
  for (std::uint32_t len : {0u, 300u}) {
    shm::SqEntry e = entry(shm::Op::Open, 0);
    e.offset = payload;
    e.length = len;
    add(e, B);
  }
  for (std::uint64_t token : {0ull, 0x123456789abcdefull, ~0ull}) {
    shm::SqEntry e = entry(shm::Op::Reply, 0);
    e.token = token;
    e.offset = payload;
    e.length = 16;
    add(e, B);
  }
  for (std::uint64_t off : {tx, rx, rx + 64}) {
    shm::SqEntry e = entry(shm::Op::ReleaseRx, 0);
    e.offset = off;
    e.flags = off == rx + 64 ? shm::kSqFlagQuiet : 0;  // a quiet failure still reports
    add(e, B);
  }
  {
    shm::SqEntry e = entry(shm::Op::Unserve, 0);
    e.handle = 0xdead;
    add(e, B);
  }
  {
    shm::SqEntry e = entry(shm::Op::Close, 0);
    e.handle = 0xdead;
    add(e, Status::EndpointClosed);
  }
  {
    shm::SqEntry e = send_at(payload, 64);
    e.handle = 0xdead;
    add(e, Status::EndpointClosed);
  }
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 200; ++i) {  // random bytes; a nonzero reserved word keeps each one invalid
    shm::SqEntry e;
    auto* w = reinterpret_cast<std::uint64_t*>(&e);
    for (std::size_t k = 0; k < sizeof e / 8; ++k) w[k] = rng();
    e.reserved1 |= 1;
    add(e, B);
  }
  for (const auto& e : bad) {
    if (!r.submit(e)) return fail(4, "could not submit bad entries");
  }
  std::map<std::uint64_t, int> seen;
  const auto deadline = Clock::now() + 10s;
  while (seen.size() < expect.size() && Clock::now() < deadline) {
    shm::CqEntry got[64];
    const std::uint32_t n = r.reap(got, 64, 100);
    for (std::uint32_t i = 0; i < n; ++i) {
      auto it = expect.find(got[i].user_data);
      if (got[i].kind != 0 || it == expect.end())
        return fail(5, "unexpected completion kind %u ud %llu", got[i].kind, (unsigned long long)got[i].user_data);
      if (++seen[got[i].user_data] > 1)
        return fail(6, "bad entry %llu completed twice", (unsigned long long)got[i].user_data);
      if (got[i].status != static_cast<std::uint8_t>(it->second)) {
        const shm::SqEntry& e = bad[got[i].user_data - 100];
        return fail(7, "bad entry #%llu (op %u) got %s, want %s", (unsigned long long)(got[i].user_data - 100), e.op,
                    st(got[i].status), to_string(it->second).data());
      }
    }
  }
  if (seen.size() != expect.size()) return fail(8, "%zu of %zu bad entries answered", seen.size(), expect.size());

  // ReleaseRx mid-block and double free on a real delivery (past the
  // inline size, so it names an rx block); forged and reused reply tokens.
  if (!roundtrip(r, send_at(payload, 1000), done, side) || done.status != 0)
    return fail(9, "self send: %s", st(done.status));
  shm::CqEntry msg{};
  const auto t0 = Clock::now();
  while (side.empty() && Clock::now() - t0 < 5s) {
    shm::CqEntry got;
    if (r.reap(&got, 1, 100) == 1) side.push_back(got);
  }
  if (side.empty() || side.back().kind != static_cast<std::uint8_t>(shm::CqKind::Message) ||
      side.back().handle != service)
    return fail(10, "no delivery of self send");
  msg = side.back();
  side.clear();
  shm::SqEntry rel = entry(shm::Op::ReleaseRx, 20);
  rel.offset = msg.offset + 1;
  if (!roundtrip(r, rel, done, side) || done.status != static_cast<std::uint8_t>(B))
    return fail(11, "mid-block release: %s", st(done.status));
  rel.offset = msg.offset;
  rel.user_data = 21;
  if (!roundtrip(r, rel, done, side) || done.status != 0) return fail(12, "release: %s", st(done.status));
  rel.user_data = 22;
  if (!roundtrip(r, rel, done, side) || done.status != static_cast<std::uint8_t>(B))
    return fail(13, "double release: %s", st(done.status));

  // Flood: push Nops as fast as possible without reading the CQ, then drain.
  constexpr std::uint64_t kFlood = 20000, kBase = 1000000;
  std::vector<std::uint8_t> nop_seen(kFlood, 0);
  std::uint64_t pushed = 0, answered = 0;
  const auto flood_until = Clock::now() + 500ms;
  while (pushed < kFlood && Clock::now() < flood_until) {
    if (r.sq().try_push(entry(shm::Op::Nop, kBase + pushed))) {
      ++pushed;
      if (r.sq().claim_doorbell()) r.ring_sq();
    }
  }
  const auto drain_until = Clock::now() + 15s;
  while (answered < kFlood && Clock::now() < drain_until) {
    while (pushed < kFlood && r.sq().try_push(entry(shm::Op::Nop, kBase + pushed))) ++pushed;
    if (r.sq().claim_doorbell()) r.ring_sq();
    shm::CqEntry got[256];
    const std::uint32_t n = r.reap(got, 256, 50);
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint64_t k = got[i].user_data - kBase;
      if (got[i].kind != 0 || k >= pushed || got[i].status != 0 || nop_seen[k]++)
        return fail(14, "flood: bad completion ud %llu status %s", (unsigned long long)got[i].user_data,
                    st(got[i].status));
      ++answered;
    }
  }
  if (answered != kFlood)
    return fail(15, "flood: %llu of %llu Nops answered", (unsigned long long)answered, (unsigned long long)kFlood);
  return 0;
}

}  // namespace

TEST_CASE("garbage in one client's SQ never hurts the daemon or other clients") {
  Daemon d;
  Gate ready, server_stop, caller_stop;
  const pid_t server = spawn([&] { return run_rpc_server({d.socket()}, ready, server_stop); });
  REQUIRE(ready.wait(10s));
  CallerSpec good;
  good.socket = d.socket();
  good.caller = 7;
  good.count = 100;
  good.concurrency = 4;
  good.max_size = 300000;
  good.stop = &caller_stop;
  const pid_t caller = spawn([good] { return run_caller(good); });
  const std::string sock = d.socket();
  const pid_t bad = spawn([sock] { return hostile(sock); });
  CHECK(reap(bad, 40s) == 0);

  // A client that publishes an SQ head more than a ring ahead is cut off.
  {
    RawClient liar(d.socket(), "liar");
    REQUIRE(liar.ok());
    REQUIRE(d.wait_clients(3, 2s));
    auto* h = liar.view().sq_header;
    h->head.store(h->tail.load() + liar.view().sq_capacity + 5, std::memory_order_release);
    liar.ring_sq();
    CHECK(liar.hung_up(3000));
    CHECK(d.wait_clients(2, 2s));
  }
  caller_stop.signal();
  CHECK(reap(caller, 30s) == 0);
  server_stop.signal();
  CHECK(reap(server, 10s) == 0);
  CHECK(d.alive());
}
