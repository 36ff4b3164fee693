// One engine's datapath (daemon/datapath.h) on a recording transport, with
// clients the test plays itself: each has a real segment whose SQ the test
// fills and whose CQ it reads ("fake rings": the rings are real, the client
// process is the test). Two rigs joined by a Wire exchange what each posts,
// so the remote paths (RemoteSender, ProxyServer, the replier) run between
// two datapaths without a socket. Time is the test's: every turn starts at
// `now`, which a test moves on to reach deadlines.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/datapath.h"
#include "shm/segment.h"
#include "transport/testing/recording_transport.h"

namespace ferry::daemon::testing {

using transport::testing::RecordingTransport;

constexpr std::uint64_t kMs = 1'000'000;

// A client as the test plays it: its session in the datapath, and the
// client's ends of its rings.
struct TestClient {
  ClientSession* session = nullptr;
  shm::RingProducer<shm::SqEntry> sq;
  shm::RingConsumer<shm::CqEntry> cq;
  std::uint64_t tx_next = 0;  // bump allocation in its tx arena
  std::vector<shm::CqEntry> got;
  std::vector<std::string> payloads;  // beside got: an inline delivery's payload, else empty

  // `len` bytes of `fill` at a fresh place in the tx arena: its offset.
  std::uint64_t put(std::string_view bytes) {
    const std::uint64_t off = tx_next;
    std::memcpy(session->at(off), bytes.data(), bytes.size());
    tx_next += (bytes.size() + 63) / 64 * 64 + 64;
    return off;
  }
  std::uint64_t reserve(std::uint32_t len) {
    const std::uint64_t off = tx_next;
    tx_next += (len + 63) / 64 * 64 + 64;
    return off;
  }
  std::string text(std::uint64_t off, std::uint32_t len) const {
    return std::string(reinterpret_cast<const char*>(session->at(off)), len);
  }
  // Takes what the datapath posted since the last call (an inline
  // delivery's payload into `payloads`).
  const std::vector<shm::CqEntry>& drain() {
    shm::CqEntry e;
    while (cq.pop_batch(&e, 1) == 1) {
      std::string payload;
      if ((e.flags & shm::kCqFlagInline) != 0) {
        payload.resize(e.length);
        REQUIRE(cq.pop_bytes(reinterpret_cast<std::byte*>(payload.data()), e.length));
      }
      got.push_back(e);
      payloads.push_back(std::move(payload));
    }
    return got;
  }
  // Inline deliveries of `kind` seen so far, with their payloads.
  std::vector<std::pair<shm::CqEntry, std::string>> inline_deliveries(shm::CqKind kind) {
    drain();
    std::vector<std::pair<shm::CqEntry, std::string>> out;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (got[i].kind == static_cast<std::uint8_t>(kind) && (got[i].flags & shm::kCqFlagInline) != 0)
        out.emplace_back(got[i], payloads[i]);
    return out;
  }
  // Releases inline deliveries as libferry does: counts them in the CQ header.
  void release_inline(std::uint32_t n) {
    released += n;
    cq.publish_released(released);
  }
  std::uint32_t released = 0;
  // The OpDone entries with user_data `ud` seen so far.
  std::vector<shm::CqEntry> done(std::uint64_t ud) {
    std::vector<shm::CqEntry> out;
    for (const auto& e : drain())
      if (e.kind == static_cast<std::uint8_t>(shm::CqKind::OpDone) && e.user_data == ud) out.push_back(e);
    return out;
  }
  std::vector<shm::CqEntry> deliveries(shm::CqKind kind) {
    std::vector<shm::CqEntry> out;
    for (const auto& e : drain())
      if (e.kind == static_cast<std::uint8_t>(kind)) out.push_back(e);
    return out;
  }
};

inline shm::SqEntry entry(shm::Op op, std::uint64_t user_data) {
  shm::SqEntry e{};
  e.op = static_cast<std::uint8_t>(op);
  e.user_data = user_data;
  return e;
}

struct Rig {
  Config config;
  Counters counters;
  EngineGroup group{1};
  Transports transports;
  RecordingTransport* wire = nullptr;  // the one transport: bootstrap and tcp lanes
  std::unique_ptr<Datapath> dp;
  std::vector<std::unique_ptr<TestClient>> clients;
  std::uint32_t next_id = 1;
  std::uint64_t now = 1000 * kMs;

  Rig(const Rig&) = delete;  // the datapath keeps &now
  Rig& operator=(const Rig&) = delete;
  explicit Rig(std::uint64_t epoch, Config c = {}) : config(std::move(c)) {
    auto t = std::make_unique<RecordingTransport>();
    t->auto_complete_sends(true);
    wire = t.get();
    transports.bootstrap = std::move(t);
    transports.name = "tcp";
    transports.lane_max_message = 1u << 20;
    dp = std::make_unique<Datapath>(config, counters, 0x5eed, epoch, group, 0, transports);
    dp->deadlines.use_clock(&now);  // timeouts count on the test's clock
  }

  // `inline_ok` false: the client never counts inline deliveries released
  // (its released count says its window is full), so every delivery names
  // an rx block, as the tests of blocks want.
  TestClient& attach(std::uint64_t rx_bytes = 4u << 20, bool inline_ok = false) {
    const std::uint32_t id = next_id++;
    auto seg = shm::create_segment(shm::SegmentSizes{256, 1024, 4u << 20, rx_bytes}, id, 1, 1u << 20);
    REQUIRE(seg);
    auto info = std::make_shared<ClientInfo>();
    info->id = id;
    info->name = "test-client-" + std::to_string(id);
    auto sq_bell = shm::Doorbell::create();
    auto cq_bell = shm::Doorbell::create();
    REQUIRE(sq_bell);
    REQUIRE(cq_bell);
    const shm::SegmentView view = seg.value.view;
    auto s = std::make_unique<ClientSession>(info, std::move(seg.value), std::move(sq_bell.value),
                                             std::move(cq_bell.value), 1u << 20);
    auto c = std::make_unique<TestClient>();
    c->session = s.get();
    c->sq = shm::RingProducer<shm::SqEntry>(view.sq_header, view.sq_entries, view.sq_capacity);
    c->cq = shm::RingConsumer<shm::CqEntry>(view.cq_header, view.cq_entries, view.cq_capacity);
    if (!inline_ok) c->release_inline(0u - shm::inline_window(view.cq_capacity));
    c->tx_next = view.layout.tx_offset;
    dp->sessions.add(std::move(s));
    clients.push_back(std::move(c));
    return *clients.back();
  }

  // One engine turn's worth of the components, at `now`.
  void turn() {
    dp->deadlines.start_turn(now);
    dp->peers->woke(true);
    (void)dp->peers->poll(now);
    (void)dp->peers->tick(now);
    (void)dp->poll_submissions();
    if (!dp->parking.empty()) (void)dp->parking.retry();
    if (dp->proxy.staging()) (void)dp->proxy.retry_staged();
    if (dp->deadlines.due()) (void)dp->expire();
    dp->sessions.flush();
  }
  void submit(TestClient& c, const shm::SqEntry& e) {
    REQUIRE(c.sq.try_push(e));
    turn();
  }
  // Serve `name`: its service id.
  std::uint32_t serve(TestClient& c, std::string_view name, std::uint64_t ud = 900) {
    shm::SqEntry e = entry(shm::Op::Serve, ud);
    e.offset = c.put(name);
    e.length = static_cast<std::uint32_t>(name.size());
    submit(c, e);
    const auto d = c.done(ud);
    REQUIRE(d.size() == 1);
    REQUIRE(static_cast<Status>(d[0].status) == Status::Ok);
    return d[0].handle;
  }
  // Submit an Open of `target`; its OpDone is for the test to find.
  void open_async(TestClient& c, std::string_view target, std::uint64_t ud) {
    shm::SqEntry e = entry(shm::Op::Open, ud);
    e.offset = c.put(target);
    e.length = static_cast<std::uint32_t>(target.size());
    submit(c, e);
  }
  std::uint32_t open(TestClient& c, std::string_view target, std::uint64_t ud = 901) {
    open_async(c, target, ud);
    const auto d = c.done(ud);
    REQUIRE(d.size() == 1);
    REQUIRE(static_cast<Status>(d[0].status) == Status::Ok);
    return d[0].handle;
  }
  // `server` serves `name`, `client` opens it: the endpoint.
  std::uint32_t connect(TestClient& server, TestClient& client, std::string_view name = "svc") {
    serve(server, name);
    return open(client, name);
  }
  void send(TestClient& c, std::uint32_t ep, std::string_view payload, std::uint64_t ud) {
    shm::SqEntry e = entry(shm::Op::Send, ud);
    e.handle = ep;
    e.offset = c.put(payload);
    e.length = static_cast<std::uint32_t>(payload.size());
    submit(c, e);
  }
  // A call with a response buffer of `resp_len`: the buffer's offset.
  std::uint64_t call(TestClient& c, std::uint32_t ep, std::string_view payload, std::uint32_t resp_len,
                     std::uint64_t ud, std::uint32_t timeout_ms = 0) {
    shm::SqEntry e = entry(shm::Op::Call, ud);
    e.handle = ep;
    e.offset = c.put(payload);
    e.length = static_cast<std::uint32_t>(payload.size());
    e.resp_offset = c.reserve(resp_len);
    e.resp_length = resp_len;
    e.timeout_ms = timeout_ms;
    submit(c, e);
    return e.resp_offset;
  }
  void reply(TestClient& server, std::uint64_t token, std::string_view payload, std::uint64_t ud) {
    shm::SqEntry e = entry(shm::Op::Reply, ud);
    e.token = token;
    e.offset = server.put(payload);
    e.length = static_cast<std::uint32_t>(payload.size());
    submit(server, e);
  }
  void release(TestClient& c, const shm::CqEntry& delivery) {
    shm::SqEntry e = entry(shm::Op::ReleaseRx, 0);
    e.flags = shm::kSqFlagQuiet;
    e.offset = delivery.offset;
    e.length = delivery.capacity;
    submit(c, e);
  }
  void detach(TestClient& c) {
    REQUIRE(dp->detach(c.session->id()));
    turn();
  }
};

// Two rigs back to back: what one posts on a connection arrives at the
// other as a Recv on the matching one (A dials conns 1, 2, ...; B accepts
// them as 11, 12, ...), an Accepted first for each Hello.
struct Wire {
  Rig& a;
  Rig& b;
  std::size_t a_shipped = 0, b_shipped = 0;

  static void ship(Rig& from, std::size_t& shipped, Rig& to, bool from_a) {
    const auto& sent = from.wire->sent();
    for (; shipped < sent.size(); ++shipped) {
      const auto& s = sent[shipped];
      const transport::ConnId dst = from_a ? s.conn + 10 : s.conn - 10;
      if (s.header.type == wire::MsgType::Hello) {
        transport::Completion acc;
        acc.kind = transport::CompletionKind::Accepted;
        acc.conn = dst;
        to.wire->inject(acc);
      }
      std::vector<std::byte> payload = s.prefix;
      payload.insert(payload.end(), s.payload.begin(), s.payload.end());
      to.wire->inject_recv(dst, s.header, std::move(payload));
    }
  }
  // Rounds of: A's messages to B, B's turn, B's messages to A, A's turn.
  void run(int rounds = 8) {
    for (int i = 0; i < rounds; ++i) {
      ship(a, a_shipped, b, true);
      b.turn();
      ship(b, b_shipped, a, false);
      a.turn();
    }
  }
};

}  // namespace ferry::daemon::testing
