// RdmaTransport over real verbs (Soft-RoCE in the VM): rxe0/198.18.0.1 and
// rxe1/198.18.0.2 in one process. Eager sends both ways with checksums and
// a credit window (no RNR may ever happen), WriteImm, Read, close, connect
// failure, a full listener's reasoned reject, one that could not make a QP,
// and the QP attributes ferry promises (rnr_retry 0).
#include <sys/epoll.h>
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <cstring>
#include <optional>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "tests/rdma/rdma_test_util.h"
#include "transport/rdma/rdma_fault.h"
#include "transport/wire/header.h"

namespace ferry::transport::rdma::test {
namespace {

constexpr std::uint32_t kMaxEager = 4096;

// Deterministic content of message `seq` of direction `dir`.
std::uint32_t size_of(std::uint64_t seq) {
  static constexpr std::uint32_t kSizes[] = {0, 1, 7, 48, 100, 200, 511, 1024, 2000, 3000, 4095, 4096};
  return kSizes[(seq * 7 + seq / 13) % (sizeof kSizes / sizeof kSizes[0])];
}
std::byte byte_at(int dir, std::uint64_t seq, std::uint32_t i) {
  return static_cast<std::byte>((seq * 131 + i * 7 + static_cast<unsigned>(dir) * 17) & 0xFF);
}
std::uint64_t fnv(const std::byte* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<std::uint8_t>(p[i])) * 1099511628211ull;
  return h;
}

// A page-aligned buffer registered with one transport.
struct Region {
  std::byte* data = nullptr;
  std::size_t len = 0;
  MemoryHandle mh{};
  Transport* owner = nullptr;
  Region(Transport& t, std::size_t n) : len(n), owner(&t) {
    data = static_cast<std::byte*>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(data != MAP_FAILED);
    auto r = t.register_memory(data, n);
    REQUIRE(r.status == Status::Ok);
    mh = r.value;
    REQUIRE(mh.lkey != 0);
  }
  ~Region() {
    (void)owner->deregister_memory(mh);  // a destructor has nobody to tell
    munmap(data, len);
  }
  wire::RemoteBuffer remote(std::size_t off, std::uint32_t n) const {
    return wire::RemoteBuffer{reinterpret_cast<std::uint64_t>(data + off), mh.rkey, n};
  }
};

// One direction of the eager stream: sender side state and receiver checks.
struct Stream {
  int dir;
  Transport* tx;
  ConnId conn;
  Region* src;  // kWindowSlots slots of kMaxEager bytes
  std::uint64_t total;
  std::uint64_t next = 0;       // next seq to post
  std::uint64_t done_upto = 0;  // every seq < done_upto finished (SendDone)
  std::uint64_t received = 0;   // Recv completions seen by the peer, in order
  std::uint64_t bad = 0;        // checksum/order/size mismatches
  std::uint64_t failed = 0;     // SendDone with a failure status

  // The peer's receive queue holds kRecvDepth; up to kPollBatch of its
  // slots await repost after a poll. Staying below the rest of it is the
  // credit rule ferry's channels follow: no RNR can occur.
  static constexpr std::uint64_t kWindow = kRecvDepth - kPollBatch - 8;
  static constexpr std::uint64_t kWindowSlots = 128;

  void post_some() {
    std::array<SendWr, kPostBatch> wrs{};
    std::size_t n = 0;
    while (n < wrs.size() && next < total && next - received < kWindow && next - done_upto < kWindowSlots - 1) {
      const std::uint32_t len = size_of(next);
      std::byte* p = src->data + (next % kWindowSlots) * kMaxEager;
      for (std::uint32_t i = 0; i < len; ++i) p[i] = byte_at(dir, next, i);
      SendWr& w = wrs[n++];
      w = SendWr{};
      w.conn = conn;
      w.op = WrOp::Send;
      // Mixed: most unsignaled (selective signalling), every 8th and the
      // last signaled; a third from the bounce path (no lkey).
      w.signaled = next % 8 == 7 || next + 1 == total;
      w.header.type = wire::MsgType::Send;
      w.header.src_ep = 1;
      w.header.dst_ep = 2;
      w.header.seq = next;
      w.payload = p;
      w.payload_len = len;
      w.user_data = next;
      w.local = next % 3 == 0 ? MemoryHandle{} : src->mh;
      ++next;
    }
    if (n == 0) return;
    const PostResult r = tx->post_send(std::span<const SendWr>(wrs.data(), n));
    REQUIRE((r.status == Status::Ok || r.status == Status::Busy));
    next -= n - r.accepted;
  }

  void on_recv(const Completion& c) {
    const std::uint64_t seq = c.header.seq;
    const std::uint32_t len = c.header.payload_len;
    bool ok = seq == received && len == size_of(seq) && c.header.type == wire::MsgType::Send;
    if (ok) {
      std::array<std::byte, kMaxEager> want;
      for (std::uint32_t i = 0; i < len; ++i) want[i] = byte_at(dir, seq, i);
      ok = fnv(want.data(), len) == fnv(c.payload, len);
    }
    if (!ok) ++bad;
    ++received;
  }

  void on_send_done(const Completion& c) {
    if (c.status != Status::Ok) ++failed;
    if (c.user_data + 1 > done_upto) done_upto = c.user_data + 1;
  }
};

void dispatch(std::vector<Completion>& got, Stream& incoming, Stream& outgoing) {
  for (const Completion& c : got) {
    if (c.kind == CompletionKind::Recv) incoming.on_recv(c);
    if (c.kind == CompletionKind::SendDone) outgoing.on_send_done(c);
  }
  got.clear();
}

// A payload-less Send numbered `seq` on `conn`, posted at once.
void post_marker(Transport& t, ConnId conn, std::uint64_t seq) {
  SendWr w{};
  w.conn = conn;
  w.header.type = wire::MsgType::Send;
  w.header.src_ep = 1;
  w.header.dst_ep = 2;
  w.header.seq = seq;
  REQUIRE(t.post_send(std::span<const SendWr>(&w, 1)).accepted == 1);
}

}  // namespace

TEST_CASE("rdma: QPs carry ferry's transport attributes", "[rdma]") {
  Pair p = connect_pair();
  for (auto [t, conn] : {std::pair{p.a.get(), p.a_conn}, std::pair{p.b.get(), p.b_conn}}) {
    ibv_qp* qp = t->conn_qp(conn);
    REQUIRE(qp != nullptr);
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    REQUIRE(ibv_query_qp(qp, &attr,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_ACCESS_FLAGS |
                             IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC,
                         &init) == 0);
    INFO((t == p.a.get() ? "passive" : "active") << " side, QP " << qp->qp_num);
    CHECK(attr.qp_state == IBV_QPS_RTS);
    CHECK(attr.rnr_retry == 0);
    CHECK(attr.retry_cnt == 7);
    CHECK(attr.timeout == 18);
    // Both sides answer the peer's READs and WRITEs. rdma_cm alone leaves
    // REMOTE_READ off the active side's QP (ferry's READs from the passive
    // side then fail with "remote invalid request"), so this is set by ferry.
    CHECK((attr.qp_access_flags & IBV_ACCESS_REMOTE_READ) != 0);
    CHECK((attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) != 0);
    CHECK(attr.max_dest_rd_atomic == vm_config("", "").rd_atomic);
    CHECK(attr.max_rd_atomic == vm_config("", "").rd_atomic);
  }
  // The GID table scan agrees with the environment (index 1 in the VM).
  CHECK(p.a->gid().index == std::atoi(env_or("GID_INDEX", "1").c_str()));
  CHECK(p.b->gid().index == std::atoi(env_or("GID_INDEX", "1").c_str()));
  CHECK(p.a->gid().type == "RoCE v2");
}

TEST_CASE("rdma: thousands of eager sends both ways, checksummed, no RNR", "[rdma]") {
  Pair p = connect_pair();
  Region src_a(*p.a, Stream::kWindowSlots * kMaxEager);
  Region src_b(*p.b, Stream::kWindowSlots * kMaxEager);
  constexpr std::uint64_t kMessages = 3000;
  Stream ab{0, p.a.get(), p.a_conn, &src_a, kMessages};
  Stream ba{1, p.b.get(), p.b_conn, &src_b, kMessages};
  std::vector<Completion> got_a, got_b;
  const bool finished = pump_until(
      {{p.a.get(), &got_a}, {p.b.get(), &got_b}},
      [&] {
        dispatch(got_a, ba, ab);
        dispatch(got_b, ab, ba);
        ab.post_some();
        ba.post_some();
        return (ab.received == kMessages && ba.received == kMessages && ab.done_upto == kMessages &&
                ba.done_upto == kMessages) ||
               ab.failed + ba.failed + ab.bad + ba.bad > 0;
      },
      std::chrono::seconds(40));
  INFO("a->b received " << ab.received << " done " << ab.done_upto << "; b->a received " << ba.received << " done "
                        << ba.done_upto);
  CHECK(finished);
  CHECK(ab.bad == 0);
  CHECK(ba.bad == 0);
  CHECK(ab.failed == 0);
  CHECK(ba.failed == 0);
  CHECK(ab.received == kMessages);
  CHECK(ba.received == kMessages);
  for (RdmaTransport* t : {p.a.get(), p.b.get()}) {
    CHECK(t->stats().rnr_retry_exceeded == 0);
    CHECK(t->stats().wc_errors == 0);
    CHECK(t->stats().protocol_errors == 0);
    CHECK(t->stats().bounce_copies > 0);
    CHECK(t->stats().wrs_inline > 0);
    // Selective signalling: far fewer signaled WRs than posted.
    CHECK(t->stats().wrs_signaled * 4 < t->stats().wrs_posted);
    // Batching: fewer doorbells than WRs.
    CHECK(t->stats().post_send_calls < t->stats().wrs_posted);
  }
  for (const char* dev : {"RXE0", "RXE1"}) {
    const std::string d = env_or(dev, "");
    for (const char* counter : {"rcvd_rnr_err", "send_rnr_err"}) {
      const long v = rdma_counter(d, counter);
      INFO(d << " " << counter << " = " << v);
      if (v < 0) {
        WARN("rdma statistic counter " << counter << " unavailable on " << d);
      } else {
        CHECK(v == 0);
      }
    }
  }
}

TEST_CASE("rdma: RdmaWriteImm lands in the peer's buffer and notifies it", "[rdma]") {
  Pair p = connect_pair();
  constexpr std::size_t kLen = 256 * 1024;
  Region dst(*p.a, kLen);
  Region src(*p.b, kLen);
  for (std::size_t i = 0; i < kLen; ++i) src.data[i] = static_cast<std::byte>((i * 29 + 3) & 0xFF);
  // Several writes: sizes from tiny (inline) to large, each into its own range.
  const std::array<std::uint32_t, 5> sizes{16, 1000, 4096, 65536, 150000};
  std::size_t off = 0;
  std::vector<Completion> got_a, got_b;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    SendWr w{};
    w.conn = p.b_conn;
    w.op = WrOp::RdmaWriteImm;
    w.header.token = 0xABC0 + k;
    w.payload = src.data + off;
    w.payload_len = sizes[k];
    w.local = src.mh;
    w.remote = dst.remote(off, sizes[k]);
    w.user_data = 100 + k;
    REQUIRE(p.b->post_send(std::span<const SendWr>(&w, 1)).accepted == 1);
    Completion note{};
    bool sent = false;
    Status sent_status = Status::Ok;
    REQUIRE(pump_until(
        {{p.a.get(), &got_a}, {p.b.get(), &got_b}},
        [&] {
          for (auto& c : got_a) {
            if (c.kind == CompletionKind::Recv) note = c;
          }
          for (auto& c : got_b) {
            if (c.kind == CompletionKind::SendDone && c.user_data == 100 + k) sent = true, sent_status = c.status;
          }
          got_a.clear();
          got_b.clear();
          // A failed write never notifies the peer: stop at its SendDone.
          return (sent && note.kind == CompletionKind::Recv) || (sent && sent_status != Status::Ok);
        },
        std::chrono::seconds(20)));
    INFO("write " << k << " (" << sizes[k] << " B) completed with " << to_string(sent_status));
    REQUIRE(sent_status == Status::Ok);
    CHECK(note.conn == p.a_conn);
    CHECK(note.header.type == wire::MsgType::WriteDone);
    CHECK(note.header.token == 0xABC0 + k);
    CHECK(note.header.aux == sizes[k]);
    CHECK(fnv(dst.data + off, sizes[k]) == fnv(src.data + off, sizes[k]));
    off += sizes[k];
  }
  // Bytes outside the written ranges stay untouched.
  for (std::size_t i = off; i < kLen; ++i) REQUIRE(dst.data[i] == std::byte{0});
}

TEST_CASE("rdma: RdmaRead fetches a registered remote buffer", "[rdma]") {
  Pair p = connect_pair();
  constexpr std::uint32_t kLen = 200000;
  Region remote(*p.b, kLen);
  Region local(*p.a, kLen);
  for (std::uint32_t i = 0; i < kLen; ++i) remote.data[i] = static_cast<std::byte>((i * 13 + 5) & 0xFF);
  SendWr w{};
  w.conn = p.a_conn;
  w.op = WrOp::RdmaRead;
  w.payload = local.data;
  w.payload_len = kLen;
  w.local = local.mh;
  w.remote = remote.remote(0, kLen);
  w.user_data = 7;
  REQUIRE(p.a->post_send(std::span<const SendWr>(&w, 1)).accepted == 1);
  std::vector<Completion> got_a, got_b;
  bool done = false;
  Status read_status = Status::Ok;
  REQUIRE(pump_until(
      {{p.a.get(), &got_a}, {p.b.get(), &got_b}},
      [&] {
        for (auto& c : got_a) {
          if (c.kind == CompletionKind::SendDone && c.user_data == 7) done = true, read_status = c.status;
        }
        got_a.clear();
        return done;
      },
      std::chrono::seconds(20)));
  // A failed READ also ends in a SendDone (and drains the connection): the
  // bytes are only worth comparing after a successful one.
  INFO("READ completed with " << to_string(read_status) << "; wc errors " << p.a->stats().wc_errors);
  REQUIRE(read_status == Status::Ok);
  CHECK(p.a->stats().wc_errors == 0);
  CHECK(fnv(local.data, kLen) == fnv(remote.data, kLen));
  // A read without a local key is refused, not posted (the connection is
  // still open, so the refusal is about the WR, not EndpointClosed).
  REQUIRE(p.a->conn_qp(p.a_conn) != nullptr);
  w.local = MemoryHandle{};
  const PostResult r = p.a->post_send(std::span<const SendWr>(&w, 1));
  CHECK(r.accepted == 0);
  CHECK(r.status == Status::BadRequest);
}

TEST_CASE("rdma: close ends both sides with Closed; pending WRs complete first", "[rdma]") {
  Pair p = connect_pair();
  std::vector<Completion> got_a, got_b;
  REQUIRE(p.b->close(p.b_conn) == Status::Ok);
  bool closed_a = false, closed_b = false;
  Status a_status = Status::Ok, b_status = Status::BadRequest;
  REQUIRE(pump_until(
      {{p.a.get(), &got_a}, {p.b.get(), &got_b}},
      [&] {
        for (auto& c : got_a) {
          if (c.kind == CompletionKind::Closed && c.conn == p.a_conn) closed_a = true, a_status = c.status;
        }
        for (auto& c : got_b) {
          if (c.kind == CompletionKind::Closed && c.conn == p.b_conn) closed_b = true, b_status = c.status;
        }
        got_a.clear();
        got_b.clear();
        return closed_a && closed_b;
      },
      std::chrono::seconds(20)));
  CHECK(b_status == Status::Ok);
  CHECK(a_status == Status::PeerReset);
  SendWr w{};
  w.conn = p.b_conn;
  w.header.type = wire::MsgType::Send;
  CHECK(p.b->post_send(std::span<const SendWr>(&w, 1)).status == Status::EndpointClosed);
  CHECK(p.b->close(p.b_conn) == Status::EndpointClosed);
}

TEST_CASE("rdma: event_fd wakes an idle owner when a message arrives", "[rdma]") {
  Pair p = connect_pair();
  std::array<Completion, kPollBatch> buf{};
  // Drain until idle, then go to sleep the way the engine does: arm, poll
  // once more when arming says so, until arming says the CQ is quiet.
  for (int i = 0; i < 100; ++i) p.a->poll(buf);
  // (Armed at start; quiet unless the connection's set-up fired it.)
  int arms = 0;
  while (!p.a->prepare_to_sleep()) {
    REQUIRE(++arms < 2);
    p.a->poll(buf);
  }
  epoll_event ev{};
  CHECK(epoll_wait(p.a->event_fd(), &ev, 1, 0) == 0);  // nothing pending: not readable
  post_marker(*p.b, p.b_conn, 42);
  REQUIRE(epoll_wait(p.a->event_fd(), &ev, 1, 10000) == 1);
  bool got = false;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!got && Clock::now() < deadline) {
    const std::size_t n = p.a->poll(buf);
    for (std::size_t i = 0; i < n; ++i) got |= buf[i].kind == CompletionKind::Recv && buf[i].header.seq == 42;
  }
  CHECK(got);
}

TEST_CASE("rdma: connect to a port nobody listens on is PeerUnreachable within the bound", "[rdma]") {
  auto b = make(env_or("RXE1", "rxe1"), env_or("ADDR1", "198.18.0.2"));
  const auto t0 = Clock::now();
  auto r = b->connect(env_or("ADDR0", "198.18.0.1"), 1);
  CHECK(r.status == Status::PeerUnreachable);
  CHECK(Clock::now() - t0 < std::chrono::milliseconds(vm_config("", "").connect_timeout_ms + 2000));
}

TEST_CASE("rdma: a spinning owner leaves the CQ unarmed: no event, no syscall per arrival", "[rdma]") {
  Pair p = connect_pair();
  std::array<Completion, kPollBatch> buf{};
  // Sleep once and wake (consumes the arm), then spin: poll() alone never
  // arms the CQ again, so a message arriving meanwhile raises no event.
  while (!p.a->prepare_to_sleep()) p.a->poll(buf);
  SendWr w{};
  w.conn = p.b_conn;
  w.header.type = wire::MsgType::Send;
  w.header.src_ep = 1;
  w.header.dst_ep = 2;
  for (std::uint64_t seq = 1; seq <= 3; ++seq) {
    w.header.seq = seq;
    REQUIRE(p.b->post_send(std::span<const SendWr>(&w, 1)).accepted == 1);
    bool got = false;
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!got && Clock::now() < deadline) {
      const std::size_t n = p.a->poll(buf);
      for (std::size_t i = 0; i < n; ++i) got |= buf[i].kind == CompletionKind::Recv && buf[i].header.seq == seq;
      p.b->poll(buf);
    }
    REQUIRE(got);
  }
  // The first arrival fired the arm made before; the second and third found
  // the CQ unarmed. Going to sleep now drains that one event and re-arms.
  CHECK_FALSE(p.a->prepare_to_sleep());
  CHECK(p.a->prepare_to_sleep());
  epoll_event ev{};
  CHECK(epoll_wait(p.a->event_fd(), &ev, 1, 0) == 0);
}

TEST_CASE("rdma: a listener with no free slot rejects saying so: the dial ends Busy, not PeerUnreachable", "[rdma]") {
  const std::string addr0 = env_or("ADDR0", "198.18.0.1");
  RdmaConfig one = vm_config(env_or("RXE0", "rxe0"), addr0);
  one.max_connections = 1;  // the pair's connection takes it
  auto made = RdmaTransport::create(one);
  REQUIRE(made.status == Status::Ok);
  Pair p = connect_pair(std::move(made.value));
  std::vector<Completion> got_a, got_b;

  // connect_async: Closed with Busy (cm_reject.h's reason on the reject).
  auto dial = p.b->connect_async(addr0, p.port);
  REQUIRE(dial.status == Status::Ok);
  bool ended = false;
  Status why = Status::Ok;
  REQUIRE(pump_until(
      {{p.a.get(), &got_a}, {p.b.get(), &got_b}},
      [&] {
        for (const Completion& c : got_b) {
          if (c.conn != dial.value) continue;
          CHECK(c.kind != CompletionKind::Connected);
          if (c.kind == CompletionKind::Closed) ended = true, why = c.status;
        }
        got_b.clear();
        for (const Completion& c : got_a) CHECK(c.kind != CompletionKind::Accepted);
        got_a.clear();
        return ended;
      },
      std::chrono::seconds(30)));
  CHECK(why == Status::Busy);

  // connect() (blocking, a polled meanwhile on this thread): Busy too.
  Result<ConnId> res;
  std::atomic<bool> done{false};
  p.b->release_owner();  // the helper thread dials; this one takes b back afterwards
  std::thread th([&] {
    res = p.b->connect(addr0, p.port);
    p.b->release_owner();
    done = true;
  });
  REQUIRE(pump_until(
      {{p.a.get(), &got_a}}, [&] { return done.load(); }, std::chrono::seconds(30)));
  th.join();
  CHECK(res.status == Status::Busy);

  // The connection that holds the slot is unharmed: a message crosses it.
  post_marker(*p.b, p.b_conn, 7);
  got_a.clear();
  bool arrived = false;
  REQUIRE(pump_until(
      {{p.a.get(), &got_a}, {p.b.get(), &got_b}},
      [&] {
        for (const Completion& c : got_a) arrived |= c.kind == CompletionKind::Recv && c.header.seq == 7;
        got_a.clear();
        return arrived;
      },
      std::chrono::seconds(20)));

  // A port nobody listens on is still PeerUnreachable: the reason is not a default.
  CHECK(p.b->connect(addr0, 1).status == Status::PeerUnreachable);
}

TEST_CASE("rdma: a listener that cannot make a QP rejects saying so; the dialler logs why", "[rdma]") {
  const std::string addr0 = env_or("ADDR0", "198.18.0.1");
  // The test-only switch (transport/rdma/rdma_fault.h): the first request's
  // QP is not made. A tree without fault injection ignores it.
  const auto refusing = [&] {
    ::setenv(kRdmaFaultEnv, "accept-qp-fail-after=1", 1);
    auto made = RdmaTransport::create(vm_config(env_or("RXE0", "rxe0"), addr0));
    ::unsetenv(kRdmaFaultEnv);
    REQUIRE(made.status == Status::Ok);
    return std::move(made.value);
  };
  std::unique_ptr<RdmaTransport> a = refusing();
  std::unique_ptr<RdmaTransport> b = make(env_or("RXE1", "rxe1"), env_or("ADDR1", "198.18.0.2"));
  const auto port = a->listen(addr0, 0);
  REQUIRE(port.status == Status::Ok);
  auto log = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
  spdlog::default_logger()->sinks().push_back(log);
  const auto dial = [&] {
    auto d = b->connect_async(addr0, port.value);
    REQUIRE(d.status == Status::Ok);
    std::vector<Completion> got_a, got_b;
    std::optional<Completion> end;
    REQUIRE(pump_until(
        {{a.get(), &got_a}, {b.get(), &got_b}},
        [&] {
          for (const Completion& c : got_b) {
            if (c.conn == d.value && (c.kind == CompletionKind::Closed || c.kind == CompletionKind::Connected)) end = c;
          }
          got_b.clear();
          return end.has_value();
        },
        std::chrono::seconds(30)));
    return *end;
  };
  const Completion first = dial();
  const Completion second = dial();

  // connect() (blocking, on a helper thread while this one polls the
  // listener), against a second listener that refuses its first QP.
  std::unique_ptr<RdmaTransport> a2 = refusing();
  const auto port2 = a2->listen(addr0, 0);
  REQUIRE(port2.status == Status::Ok);
  Result<ConnId> blocking;
  std::atomic<bool> done{false};
  b->release_owner();  // the helper thread dials; this one takes b back afterwards
  std::thread th([&] {
    blocking = b->connect(addr0, port2.value);
    b->release_owner();
    done = true;
  });
  std::vector<Completion> got_a2;
  const bool returned = pump_until(
      {{a2.get(), &got_a2}}, [&] { return done.load(); }, std::chrono::seconds(30));
  th.join();
  spdlog::default_logger()->sinks().pop_back();
  REQUIRE(returned);

  std::size_t async_why = 0, blocking_why = 0;
  const std::string blocking_dial = addr0 + ":" + std::to_string(port2.value) + " from";
  for (const std::string& line : log->last_formatted()) {
    if (line.find("could not make a QP") == std::string::npos) continue;
    ++(line.find(blocking_dial) != std::string::npos ? blocking_why : async_why);
  }
  if constexpr (kFaultInjection) {
    CHECK(first.kind == CompletionKind::Closed);
    CHECK(first.status == Status::PeerUnreachable);  // not reached, and not Busy: no slot will cure it
    CHECK(async_why == 1);
    CHECK(blocking.status == Status::PeerUnreachable);
    CHECK(blocking_why == 1);
  } else {
    CHECK(first.kind == CompletionKind::Connected);
    CHECK(blocking.status == Status::Ok);
    CHECK(async_why + blocking_why == 0);
  }
  CHECK(second.kind == CompletionKind::Connected);  // the switch fires once; the listener goes on
}

}  // namespace ferry::transport::rdma::test
