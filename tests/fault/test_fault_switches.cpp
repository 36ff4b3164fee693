// The test-only fault switches themselves, on two TcpTransports over
// 127.0.0.1 (no daemon): strict parsing, create() refusing a malformed
// FERRY_FAULT_TCP, drop-after=N removing exactly the Nth data frame (the
// sender still gets every SendDone, Ok; the stream stays framed) and
// corrupt-after=N making the receiver close the connection ProtocolError.
#include <cstdlib>
#include <vector>

#include "ferry_config.h"
#include "tests/unit/transport/tcp_test_util.h"
#include "transport/tcp/tcp_fault.h"
#if FERRY_HAVE_RDMA
#include "transport/rdma/rdma_fault.h"
#endif

using namespace ferry;
using namespace ferry::transport;
using namespace ferry::transport::testing;

namespace {

// Creates the sending side with FERRY_FAULT_TCP=spec (the receiver without).
ConnectedPair faulty_pair(const char* spec) {
  ::unsetenv(tcp::kTcpFaultEnv);
  auto server = make_transport();
  ::setenv(tcp::kTcpFaultEnv, spec, 1);
  auto client = make_transport();
  ::unsetenv(tcp::kTcpFaultEnv);
  ConnectedPair p;
  p.server = std::move(server);
  p.client = std::move(client);
  auto l = p.server->listen("127.0.0.1", 0);
  REQUIRE(l.status == Status::Ok);
  auto c = p.client->connect("127.0.0.1", l.value);
  REQUIRE(c.status == Status::Ok);
  p.client_conn = c.value;
  REQUIRE(poll_for(*p.server, [&](const Completion& cp) {
    if (cp.kind != CompletionKind::Accepted) return false;
    p.server_conn = cp.conn;
    return true;
  }));
  return p;
}

// One frame per post: a Heartbeat (never counted) first, then Sends seq 1..n.
void post_frames(ConnectedPair& p, std::uint64_t n, std::vector<std::byte>& payload) {
  SendWr hb{};
  hb.conn = p.client_conn;
  hb.header.type = wire::MsgType::Heartbeat;
  hb.user_data = 1000;
  REQUIRE(p.client->post_send(std::span<const SendWr>(&hb, 1)).accepted == 1);
  for (std::uint64_t i = 1; i <= n; ++i) {
    SendWr w{};
    w.conn = p.client_conn;
    w.header = send_header(i, i);
    w.payload = payload.data();
    w.payload_len = static_cast<std::uint32_t>(payload.size());
    w.user_data = i;
    REQUIRE(p.client->post_send(std::span<const SendWr>(&w, 1)).accepted == 1);
  }
}

}  // namespace

TEST_CASE("FERRY_FAULT_TCP parsing is strict") {
  auto d = tcp::parse_tcp_fault("drop-after=7");
  REQUIRE(d);
  CHECK(d.value.kind == tcp::TcpFaultKind::Drop);
  CHECK(d.value.after == 7);
  auto c = tcp::parse_tcp_fault("corrupt-after=1");
  REQUIRE(c);
  CHECK(c.value.kind == tcp::TcpFaultKind::Corrupt);
  for (const char* bad : {"", "drop", "drop-after=", "drop-after=0", "drop-after=-1", "drop-after=5x", "drop-after= 5",
                          "corrupt-after=99999999999999", "Drop-after=5", "reorder-after=3"})
    CHECK(tcp::parse_tcp_fault(bad).status == Status::BadRequest);
#if FERRY_HAVE_RDMA
  auto q = rdma::parse_rdma_fault("qp-error-after=42");
  REQUIRE(q);
  CHECK(q.value.after == 42);
  CHECK(q.value.accept_after == 0);
  auto a = rdma::parse_rdma_fault("accept-qp-fail-after=2");
  REQUIRE(a);
  CHECK(a.value.after == 0);
  CHECK(a.value.accept_after == 2);
  if constexpr (kFaultInjection) {
    CHECK_FALSE(a.value.refuse_qp());  // the 1st request's QP is made
    CHECK(a.value.refuse_qp());        // the 2nd's is not
    CHECK_FALSE(a.value.refuse_qp());  // once
  }
  for (const char* bad : {"", "qp-error-after=", "qp-error-after=0", "qp-error=3", "qp-error-after=3 ",
                          "accept-qp-fail-after=0", "accept-qp-fail-after=", "accept-qp-fail=1"})
    CHECK(rdma::parse_rdma_fault(bad).status == Status::BadRequest);
#endif
}

TEST_CASE("a malformed FERRY_FAULT_TCP makes create() fail; unset or empty costs nothing") {
  ::setenv(tcp::kTcpFaultEnv, "drop-after=zero", 1);
  CHECK(tcp::TcpTransport::create({}).status == Status::BadRequest);
  ::setenv(tcp::kTcpFaultEnv, "", 1);
  CHECK(tcp::TcpTransport::create({}).status == Status::Ok);
  ::unsetenv(tcp::kTcpFaultEnv);
  CHECK(tcp::TcpTransport::create({}).status == Status::Ok);
}

TEST_CASE("drop-after=3: the 3rd data frame never arrives, every send completes Ok, the stream stays framed") {
  auto p = faulty_pair("drop-after=3");
  std::vector<std::byte> payload(100, std::byte{0x5a});
  post_frames(p, 6, payload);
  std::vector<std::uint64_t> got;
  REQUIRE(poll_for(*p.server, [&](const Completion& c) {
    REQUIRE(c.status == Status::Ok);
    if (c.kind == CompletionKind::Recv && c.header.type == wire::MsgType::Send) got.push_back(c.header.seq);
    return got.size() == 5;
  }));
  CHECK(got == std::vector<std::uint64_t>{1, 2, 4, 5, 6});
  std::vector<std::uint64_t> done;
  REQUIRE(poll_for(*p.client, [&](const Completion& c) {
    if (c.kind != CompletionKind::SendDone) return false;
    CHECK(c.status == Status::Ok);
    done.push_back(c.user_data);
    return done.size() == 7;
  }));
  CHECK(done == std::vector<std::uint64_t>{1000, 1, 2, 3, 4, 5, 6});
  // Nothing more arrives: the fault fired once.
  CHECK_FALSE(poll_for(
      *p.server, [](const Completion&) { return true; }, std::chrono::milliseconds(200)));
}

TEST_CASE("corrupt-after=2: the receiver takes the 1st data frame, then closes ProtocolError") {
  auto p = faulty_pair("corrupt-after=2");
  std::vector<std::byte> payload(64, std::byte{0x11});
  post_frames(p, 3, payload);
  std::vector<std::uint64_t> got;
  Status closed = Status::Ok;
  REQUIRE(poll_for(*p.server, [&](const Completion& c) {
    if (c.kind == CompletionKind::Recv && c.header.type == wire::MsgType::Send) got.push_back(c.header.seq);
    if (c.kind != CompletionKind::Closed) return false;
    closed = c.status;
    return true;
  }));
  CHECK(got == std::vector<std::uint64_t>{1});
  CHECK(closed == Status::ProtocolError);
}
