// TcpTransport past the one-word attention mask it once had: 300
// connections over real loopback sockets, a message each way on every one,
// deliveries deferred through the attention mask (a poll that returns at
// most 2 completions leaves buffered frames that epoll will not report
// again), every one closed, the slots reused. And what idle slots cost:
// the resident size of a 1,024-slot transport, and the pages a closed
// connection gives back.
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "tcp_test_util.h"

using namespace ferry;
using namespace ferry::transport;
using namespace ferry::transport::testing;
using namespace std::chrono_literals;

namespace {

constexpr std::uint32_t kConns = 300;      // well past 64, each side of each connection a descriptor
constexpr std::uint32_t kMsgsPerConn = 3;  // per direction and phase, sent in one batch
constexpr std::uint32_t kSmall = 64;       // three frames of it arrive in one segment, read by one recv
constexpr std::size_t kPayload = 64 * 1024;

std::uint32_t slot_of(ConnId c) { return (c & 0xFFFFu) - 1; }

// VmRSS of this process in KiB.
// AddressSanitizer keeps a shadow byte per 8 bytes of memory the test
// touched, and the shadow stays resident when the buffers are given back:
// under ASan the "all closed" figure may keep 1/8 of what traffic touched.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsanShadow = true;
#else
constexpr bool kAsanShadow = false;
#endif

long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// Room for both ends of kConns connections in this process, or false.
bool enough_descriptors() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return false;
  const rlim_t want = 2 * kConns + 64;
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < want) {
    if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < want) return false;
    lim.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) return false;
  }
  return true;
}

struct Side {
  std::unique_ptr<TcpTransport> t;
  std::vector<ConnId> conns;             // index i: the i-th connection of the test
  std::vector<std::uint32_t> received;   // per index: messages received
  std::vector<std::uint32_t> send_done;  // per index
  std::vector<bool> closed;
  std::uint32_t closed_n = 0;
  std::vector<Completion> other;  // Accepted and the like, for the caller
  std::uint32_t sent = 0;         // messages sent on each connection so far (their seq)
  std::uint32_t expect_len = 0;   // payload length of what arrives now
};

std::uint32_t index_of(const Side& s, ConnId c) {
  const auto it = std::find(s.conns.begin(), s.conns.end(), c);
  REQUIRE(it != s.conns.end());
  return static_cast<std::uint32_t>(it - s.conns.begin());
}

// One poll of at most `room` completions (2: most of them leave work for
// the attention mask); checks what arrived.
void pump(Side& s, std::size_t room) {
  std::array<Completion, kPollBatch> out;
  const std::size_t n = s.t->poll(std::span<Completion>(out.data(), std::min(room, out.size())));
  for (std::size_t i = 0; i < n; ++i) {
    const Completion& c = out[i];
    switch (c.kind) {
      case CompletionKind::Recv: {
        REQUIRE(c.status == Status::Ok);
        const std::uint32_t idx = index_of(s, c.conn);
        REQUIRE(c.header.seq == s.received[idx]);  // in order, exactly once
        REQUIRE(c.header.token == idx);            // on the connection it was sent on
        REQUIRE(c.header.payload_len == s.expect_len);
        REQUIRE(std::to_integer<std::uint32_t>(c.payload[0]) == (idx & 0xFF));
        REQUIRE(std::to_integer<std::uint32_t>(c.payload[s.expect_len - 1]) == (idx & 0xFF));
        ++s.received[idx];
        break;
      }
      case CompletionKind::SendDone:
        REQUIRE(c.status == Status::Ok);
        ++s.send_done[index_of(s, c.conn)];
        break;
      case CompletionKind::Closed: {
        const std::uint32_t idx = index_of(s, c.conn);
        REQUIRE_FALSE(s.closed[idx]);
        s.closed[idx] = true;
        ++s.closed_n;
        break;
      }
      default: s.other.push_back(c); break;
    }
  }
}

template <typename Done>
bool pump_both(Side& a, Side& b, std::size_t room, Done done, std::chrono::seconds limit = 30s) {
  const auto deadline = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    pump(a, room);
    pump(b, room);
  }
  return true;
}

// kConns connections from `client` to `server`, all from 127.0.0.1:
// dialled as many at a time as one source may have unvouched (16 by
// default; more in one accept batch would evict the oldest), each vouched
// for once accepted, as the daemon's channels do once they take one.
void open_all(Side& client, Side& server, std::uint16_t port) {
  client.conns.clear();
  server.conns.clear();
  const std::uint32_t per_source = server.t->config().max_unvouched_per_source;
  for (std::uint32_t i = 0; i < kConns;) {
    const std::uint32_t batch = std::min<std::uint32_t>(per_source, kConns - i);
    for (std::uint32_t k = 0; k < batch; ++k) {
      auto c = client.t->connect("127.0.0.1", port);
      REQUIRE(c.status == Status::Ok);
      client.conns.push_back(c.value);
    }
    i += batch;
    const auto deadline = Clock::now() + 10s;
    std::array<Completion, kPollBatch> out;
    while (server.conns.size() < i) {
      REQUIRE(Clock::now() < deadline);
      const std::size_t n = server.t->poll(out);
      for (std::size_t j = 0; j < n; ++j) {
        REQUIRE(out[j].kind == CompletionKind::Accepted);
        server.t->vouch(out[j].conn);
        server.conns.push_back(out[j].conn);
      }
    }
  }
  // Accepts come in dial order on one listener: index i is the same
  // connection on both sides. (Checked below by the tokens.)
  for (Side* s : {&client, &server}) {
    s->received.assign(kConns, 0);
    s->send_done.assign(kConns, 0);
    s->closed.assign(kConns, false);
    s->closed_n = 0;
    s->sent = 0;
  }
}

// kMsgsPerConn messages of `len` bytes on every connection, all in one
// post_send call (so one batch touches every slot), payloads marked with
// the index (payloads[i & 0xFF]: its first byte and byte len - 1 are i & 0xFF).
void send_all(Side& s, const std::vector<std::vector<std::byte>>& payloads, std::uint32_t len) {
  std::vector<SendWr> wrs;
  for (std::uint32_t i = 0; i < kConns; ++i) {
    for (std::uint32_t m = 0; m < kMsgsPerConn; ++m) {
      SendWr wr{};
      wr.conn = s.conns[i];
      wr.header = send_header(s.sent + m, i);
      wr.payload = payloads[i & 0xFF].data();
      wr.payload_len = len;
      wr.user_data = i;
      wrs.push_back(wr);
    }
  }
  std::size_t posted = 0;
  const auto deadline = Clock::now() + 10s;
  while (posted < wrs.size()) {
    REQUIRE(Clock::now() < deadline);
    const PostResult r = s.t->post_send(std::span<const SendWr>(wrs).subspan(posted));
    REQUIRE((r.status == Status::Ok || r.status == Status::Busy));
    posted += r.accepted;
  }
  s.sent += kMsgsPerConn;
}

bool all_sent(const Side& s) {
  return std::all_of(s.send_done.begin(), s.send_done.end(), [&](std::uint32_t n) { return n == s.sent; });
}

bool all_received(const Side& s, std::uint32_t want) {
  return std::all_of(s.received.begin(), s.received.end(), [&](std::uint32_t n) { return n == want; });
}

// Small frames one way: every one is written (the sender's SendDones)
// before the receiver polls at all, so each connection's three frames wait
// in its socket and one recv reads them. Polls of 2 completions then hand
// out two and leave the third in the receive buffer with the socket
// drained: epoll will not report that connection again, only its bit in
// the attention mask brings the third frame out.
void deferred_one_way(Side& from, Side& to, const std::vector<std::vector<std::byte>>& payloads) {
  const std::uint32_t want = to.received.empty() ? 0 : to.received[0] + kMsgsPerConn;
  send_all(from, payloads, kSmall);
  const auto deadline = Clock::now() + 20s;
  while (!all_sent(from)) {
    REQUIRE(Clock::now() < deadline);
    pump(from, kPollBatch);
  }
  to.expect_len = kSmall;
  while (!all_received(to, want)) {
    REQUIRE(Clock::now() < deadline);
    pump(to, 2);
  }
}

}  // namespace

TEST_CASE("tcp: an idle transport of 1,024 slots costs address space, not resident memory") {
  REQUIRE(TcpConfig{}.max_connections == tcp::kMaxConnections);
  const long before = rss_kib();
  auto t = make_transport();
  auto l = t->listen("127.0.0.1", 0);
  REQUIRE(l.status == Status::Ok);
  std::array<Completion, kPollBatch> out;
  for (int i = 0; i < 10; ++i) (void)t->poll(out);
  const long after = rss_kib();
  INFO("VmRSS " << before << " KiB -> " << after << " KiB with an idle 1,024-slot transport");
  // The slot table and masks: ~100 KiB. The old layout (send queues in the
  // slots, zeroed at construction) would be 18 KiB per slot, 18 MiB here.
  CHECK(after - before < 1024);
}

TEST_CASE("tcp: 300 connections, a message each way on each, deferred deliveries, closed and reused") {
  if (!enough_descriptors()) {
    WARN("skipped: RLIMIT_NOFILE cannot cover " << 2 * kConns + 64 << " descriptors");
    return;
  }
  std::vector<std::vector<std::byte>> payloads(256);
  for (std::uint32_t v = 0; v < 256; ++v) {
    payloads[v].assign(kPayload, std::byte(0x5A));
    payloads[v][0] = payloads[v][kSmall - 1] = payloads[v][kPayload - 1] = std::byte(v);
  }

  Side server, client;
  TcpConfig scfg;
  scfg.hello_timeout_ms = 60000;  // the test's pace decides, not the silent-connection deadline
  server.t = make_transport(scfg);
  client.t = make_transport();
  auto l = server.t->listen("127.0.0.1", 0);
  REQUIRE(l.status == Status::Ok);
  const long rss_idle = rss_kib();

  // Round 1 opens fresh slots, round 2 the same slots again once round 1
  // closed them: the lowest free slots are reused, under new ConnIds.
  std::vector<ConnId> old_client, old_server;
  for (int round = 1; round <= 2; ++round) {
    INFO("round " << round);
    open_all(client, server, l.value);
    for (Side* s : {&client, &server}) {
      std::set<std::uint32_t> slots;
      for (ConnId c : s->conns) slots.insert(slot_of(c));
      CHECK(slots.size() == kConns);
      CHECK(*slots.begin() == 0);
      CHECK(*slots.rbegin() == kConns - 1);  // 236 of them at slots >= 64
    }
    if (round == 2) {
      for (std::uint32_t i = 0; i < kConns; ++i) {
        CHECK(client.conns[i] != old_client[i]);  // same slot set, a new generation
        CHECK(client.t->conn_fd(old_client[i]) == -1);
        CHECK(server.t->conn_fd(old_server[i]) == -1);
      }
      SendWr stale{};
      stale.conn = old_client[kConns - 1];
      stale.header = send_header(0, 0);
      CHECK(client.t->post_send(std::span<const SendWr>(&stale, 1)).status == Status::EndpointClosed);
    }

    // Deliveries deferred through the attention mask, 236 of the 300
    // connections at slots >= 64, each way.
    deferred_one_way(client, server, payloads);
    deferred_one_way(server, client, payloads);

    // 64 KiB frames both ways at once, still 2 completions per poll: the
    // receive buffers fill (for the memory figures below).
    client.expect_len = server.expect_len = kPayload;
    send_all(client, payloads, kPayload);
    send_all(server, payloads, kPayload);
    auto all_delivered = [&] {
      for (const Side* s : {&client, &server}) {
        if (!all_sent(*s) || !all_received(*s, 2 * kMsgsPerConn)) return false;
      }
      return true;
    };
    REQUIRE(pump_both(client, server, 2, all_delivered));
    const long rss_busy = rss_kib();

    // The client closes every one; both sides report each Closed once.
    for (ConnId c : client.conns) REQUIRE(client.t->close(c) == Status::Ok);
    REQUIRE(
        pump_both(client, server, kPollBatch, [&] { return client.closed_n == kConns && server.closed_n == kConns; }));
    for (const Side* s : {&client, &server}) CHECK(s->other.empty());
    // One more poll each: the receive buffers the last Recvs pointed into
    // are given back now.
    pump(client, kPollBatch);
    pump(server, kPollBatch);
    const long rss_closed = rss_kib();
    INFO("VmRSS idle " << rss_idle << " KiB, " << kConns << " connections after traffic " << rss_busy
                       << " KiB, all closed " << rss_closed << " KiB");
    // 2 x 300 receive buffers held up to 3 frames of 64 KiB: tens of MiB
    // while open, given back at close.
    CHECK(rss_busy - rss_idle > 32 * 1024);
    const long shadow = kAsanShadow ? (rss_busy - rss_idle) / 8 : 0;
    CHECK(rss_closed - rss_idle < 8 * 1024 + shadow);
    old_client = client.conns;
    old_server = server.conns;
  }
}
