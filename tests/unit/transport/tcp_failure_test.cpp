// TcpTransport failure paths: peer close/reset, unreachable peers within the
// configured bound, garbage from a raw socket. Each must end in a completion
// with a defined status, never a crash or a hang.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "tcp_test_util.h"
#include "transport/wire/endian.h"

using namespace ferry;
using namespace ferry::transport;
using namespace ferry::transport::testing;
using namespace std::chrono_literals;

namespace {

// A raw client socket to 127.0.0.1:port (blocking, for the test's own use).
int raw_connect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// True when the peer closed `fd` (EOF or reset) within `limit`.
bool raw_sees_close(int fd, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  std::array<char, 4096> buf;
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t r = ::recv(fd, buf.data(), buf.size(), 0);
    if (r <= 0) return true;
  }
  return false;
}

// A loopback port that does not answer: its listener's accept queue is full,
// so the kernel drops further SYNs, like a host that is silent, without
// anything sent off this machine. Holds the listener and the connections
// that filled its queue.
class SilentPort {
 public:
  SilentPort() : lfd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(lfd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(lfd_, 0) == 0);
    socklen_t len = sizeof a;
    REQUIRE(getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    TcpConfig fill_cfg;
    fill_cfg.connect_timeout_ms = 200;
    filler_ = make_transport(fill_cfg);
    // Fill the queue until a connect stalls (the kernel may admit one or two).
    bool stalled = false;
    for (int i = 0; i < 8 && !stalled; ++i) stalled = filler_->connect("127.0.0.1", port_).status != Status::Ok;
    REQUIRE(stalled);
  }
  ~SilentPort() { ::close(lfd_); }
  SilentPort(const SilentPort&) = delete;
  SilentPort& operator=(const SilentPort&) = delete;

  std::uint16_t port() const noexcept { return port_; }

 private:
  int lfd_;
  std::uint16_t port_ = 0;
  std::unique_ptr<TcpTransport> filler_;
};

ConnId accept_one(TcpTransport& server) {
  ConnId id = kInvalidConn;
  REQUIRE(poll_for(server, [&](const Completion& c) {
    if (c.kind != CompletionKind::Accepted) return false;
    id = c.conn;
    return true;
  }));
  return id;
}

bool closed_with(TcpTransport& t, ConnId conn, Status want, std::vector<Completion>* seen = nullptr) {
  Status got = Status::Ok;
  const bool ok = poll_for(
      t,
      [&](const Completion& c) {
        if (c.kind != CompletionKind::Closed || c.conn != conn) return false;
        got = c.status;
        return true;
      },
      5s, seen);
  INFO("Closed status " << to_string(got));
  return ok && got == want;
}

}  // namespace

TEST_CASE("peer close is reported as Closed with PeerReset", "[tcp][fault]") {
  ConnectedPair p = connected_pair();
  REQUIRE(p.server->close(p.server_conn) == Status::Ok);
  CHECK(closed_with(*p.server, p.server_conn, Status::Ok));  // the closing side: clean
  CHECK(closed_with(*p.client, p.client_conn, Status::PeerReset));
  // The ids are dead now.
  CHECK(p.server->close(p.server_conn) == Status::EndpointClosed);
  CHECK(p.client->conn_fd(p.client_conn) == -1);
}

TEST_CASE("a peer transport that goes away fails the connection with PeerReset", "[tcp][fault]") {
  ConnectedPair p = connected_pair();
  p.server.reset();  // as if the peer daemon died: its sockets close
  CHECK(closed_with(*p.client, p.client_conn, Status::PeerReset));
}

TEST_CASE("local close fails queued sends with Cancelled, then Closed", "[tcp][fault]") {
  TcpConfig small;
  small.sndbuf_bytes = 4096;
  ConnectedPair p = connected_pair({}, small);
  static std::vector<std::byte> big(512 * 1024);
  std::vector<SendWr> wrs(8);
  for (std::size_t i = 0; i < wrs.size(); ++i) {
    wrs[i].conn = p.client_conn;
    wrs[i].header = send_header(i, 1);
    wrs[i].payload = big.data();
    wrs[i].payload_len = static_cast<std::uint32_t>(big.size());
    wrs[i].user_data = 100 + i;
  }
  REQUIRE(p.client->post_send(wrs).accepted == wrs.size());  // server never reads: most stay queued
  REQUIRE(p.client->close(p.client_conn) == Status::Ok);
  std::vector<Completion> seen;
  REQUIRE(closed_with(*p.client, p.client_conn, Status::Ok, &seen));
  std::size_t cancelled = 0, done = 0;
  for (const Completion& c : seen) {
    if (c.kind != CompletionKind::SendDone) continue;
    CHECK(c.user_data == 100 + done + cancelled);  // in order, each once
    (c.status == Status::Ok ? done : cancelled)++;
  }
  CHECK(done + cancelled == wrs.size());  // every WR completed before Closed
  CHECK(cancelled > 0);
  CHECK(seen.back().kind == CompletionKind::Closed);
}

TEST_CASE("connect to a closed port fails with PeerUnreachable within the bound", "[tcp][fault]") {
  // Hold a bound, non-listening port so nothing else can listen there.
  const int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(holder, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  getsockname(holder, reinterpret_cast<sockaddr*>(&a), &len);
  TcpConfig cfg;
  cfg.connect_timeout_ms = 500;
  auto t = make_transport(cfg);
  const auto start = Clock::now();
  auto r = t->connect("127.0.0.1", ntohs(a.sin_port));
  CHECK(r.status == Status::PeerUnreachable);
  CHECK(Clock::now() - start < 500ms);
  ::close(holder);
  CHECK(t->connect("not-an-address", 1).status == Status::BadRequest);
}

TEST_CASE("connect to a peer that never answers gives up at the configured timeout", "[tcp][fault]") {
  const SilentPort silent;
  const std::uint16_t port = silent.port();
  TcpConfig cfg;
  cfg.connect_timeout_ms = 300;
  auto t = make_transport(cfg);
  const auto start = Clock::now();
  CHECK(t->connect("127.0.0.1", port).status == Status::PeerUnreachable);
  const auto took = Clock::now() - start;
  CHECK(took >= 280ms);
  CHECK(took < 1500ms);
}

TEST_CASE("connect_async: Connected from poll, then traffic; the caller never waits", "[tcp]") {
  auto server = make_transport();
  auto client = make_transport();
  auto l = server->listen("127.0.0.1", 0);
  REQUIRE(l);
  const auto start = Clock::now();
  auto c = client->connect_async("127.0.0.1", l.value);
  REQUIRE(c);
  CHECK(Clock::now() - start < 100ms);
  // Not usable before it is Connected.
  SendWr early;
  early.conn = c.value;
  early.header = send_header(1, 1);
  CHECK(client->post_send(std::span<const SendWr>(&early, 1)).status == Status::EndpointClosed);
  REQUIRE(poll_for(*client,
                   [&](const Completion& cp) { return cp.kind == CompletionKind::Connected && cp.conn == c.value; }));
  ConnId accepted = kInvalidConn;
  REQUIRE(poll_for(*server, [&](const Completion& cp) {
    if (cp.kind != CompletionKind::Accepted) return false;
    accepted = cp.conn;
    return true;
  }));
  CHECK(!client->peer_address(c.value).empty());
  SendWr wr;
  wr.conn = c.value;
  wr.header = send_header(1, 77);
  wr.signaled = false;
  REQUIRE(client->post_send(std::span<const SendWr>(&wr, 1)).accepted == 1);
  REQUIRE(poll_for(*server, [&](const Completion& cp) {
    return cp.kind == CompletionKind::Recv && cp.conn == accepted && cp.header.token == 77;
  }));
}

TEST_CASE("dials leave from the listen address, so the peer sees the address it knows us by", "[tcp]") {
  // 127.0.0.2 and 127.0.0.3 are both local: without a bound source the
  // kernel would pick 127.0.0.1 (lo's address) for the dial.
  auto a = make_transport();
  auto b = make_transport();
  auto wild = make_transport();
  REQUIRE(a->listen("127.0.0.2", 0));
  auto lb = b->listen("127.0.0.3", 0);
  REQUIRE(lb);
  REQUIRE(wild->listen("0.0.0.0", 0));
  for (TcpTransport* from : {a.get(), wild.get()}) {
    auto c = from->connect_async("127.0.0.3", lb.value);
    REQUIRE(c);
    REQUIRE(poll_for(*from,
                     [&](const Completion& cp) { return cp.kind == CompletionKind::Connected && cp.conn == c.value; }));
    ConnId accepted = kInvalidConn;
    REQUIRE(poll_for(*b, [&](const Completion& cp) {
      if (cp.kind != CompletionKind::Accepted) return false;
      accepted = cp.conn;
      return true;
    }));
    // A wildcard listener leaves the choice to the kernel (lo's 127.0.0.1 here).
    CHECK(b->peer_address(accepted) == (from == a.get() ? "127.0.0.2" : "127.0.0.1"));
    CHECK(from->close(c.value) == Status::Ok);
  }
}

TEST_CASE("connect_async: a refused connect comes back Closed with PeerUnreachable", "[tcp][fault]") {
  const int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // bound, not listening
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(holder, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  getsockname(holder, reinterpret_cast<sockaddr*>(&a), &len);
  auto t = make_transport();
  auto c = t->connect_async("127.0.0.1", ntohs(a.sin_port));
  if (c) {  // refused at once (loopback may answer inside connect()) is the other correct outcome
    REQUIRE(poll_for(*t, [&](const Completion& cp) {
      return cp.kind == CompletionKind::Closed && cp.conn == c.value && cp.status == Status::PeerUnreachable;
    }));
  } else {
    CHECK(c.status == Status::PeerUnreachable);
  }
  ::close(holder);
  CHECK(t->connect_async("not-an-address", 1).status == Status::BadRequest);
}

TEST_CASE("connect_async: a peer that never answers times out; close() abandons a connect", "[tcp][fault]") {
  const SilentPort silent;
  const std::uint16_t port = silent.port();
  TcpConfig cfg;
  cfg.connect_timeout_ms = 300;
  auto t = make_transport(cfg);
  const auto start = Clock::now();
  auto c = t->connect_async("127.0.0.1", port);
  REQUIRE(c);
  REQUIRE(poll_for(*t, [&](const Completion& cp) {
    return cp.kind == CompletionKind::Closed && cp.conn == c.value && cp.status == Status::PeerUnreachable;
  }));
  const auto took = Clock::now() - start;
  CHECK(took >= 280ms);
  CHECK(took < 1500ms);

  auto d = t->connect_async("127.0.0.1", port);
  REQUIRE(d);
  REQUIRE(t->close(d.value) == Status::Ok);
  REQUIRE(poll_for(
      *t,
      [&](const Completion& cp) {
        return cp.kind == CompletionKind::Closed && cp.conn == d.value && cp.status == Status::Ok;
      },
      200ms));
}

TEST_CASE("garbage bytes close the connection with ProtocolError, server keeps working", "[tcp][fault]") {
  auto server = make_transport();
  auto l = server->listen("127.0.0.1", 0);
  REQUIRE(l.status == Status::Ok);

  SECTION("text instead of frames") {
    const int fd = raw_connect(l.value);
    const ConnId conn = accept_one(*server);
    const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\nnot a ferry frame at all......................";
    REQUIRE(::send(fd, junk, sizeof junk, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof junk));
    CHECK(closed_with(*server, conn, Status::ProtocolError));
    CHECK(raw_sees_close(fd, 2000ms));
    ::close(fd);
  }
  SECTION("a valid-looking header with an oversized length") {
    const int fd = raw_connect(l.value);
    const ConnId conn = accept_one(*server);
    std::array<std::byte, wire::kHeaderBytes> h{};
    wire::encode_header(send_header(1, 1), h);
    wire::store_le32(h.data() + wire::kOffPayloadLen, server->config().max_message_bytes + 1);
    REQUIRE(::send(fd, h.data(), h.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(h.size()));
    CHECK(closed_with(*server, conn, Status::ProtocolError));
    CHECK(raw_sees_close(fd, 2000ms));
    ::close(fd);
  }
  SECTION("a frame from another protocol version") {
    const int fd = raw_connect(l.value);
    const ConnId conn = accept_one(*server);
    std::array<std::byte, wire::kHeaderBytes> h{};
    wire::encode_header(send_header(1, 1), h);
    h[wire::kOffMagicVersion] = static_cast<std::byte>(0xF0 | (wire::kProtocolVersion + 1));
    REQUIRE(::send(fd, h.data(), h.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(h.size()));
    CHECK(closed_with(*server, conn, Status::VersionMismatch));
    ::close(fd);
  }

  // Still serving: a real client connects and a message gets through.
  auto client = make_transport();
  auto c = client->connect("127.0.0.1", l.value);
  REQUIRE(c.status == Status::Ok);
  accept_one(*server);
  static const std::array<std::byte, 5> msg{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}};
  SendWr wr;
  wr.conn = c.value;
  wr.header = send_header(9, fnv1a(msg.data(), msg.size()));
  wr.payload = msg.data();
  wr.payload_len = msg.size();
  REQUIRE(client->post_send(std::span<const SendWr>(&wr, 1)).accepted == 1);
  CHECK(poll_for(*server, [&](const Completion& cp) {
    return cp.kind == CompletionKind::Recv && cp.header.seq == 9 && cp.header.payload_len == 5 &&
           std::memcmp(cp.payload, msg.data(), 5) == 0;
  }));
}
