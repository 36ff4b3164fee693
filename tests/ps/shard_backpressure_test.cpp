// The ferry-ps shard under back-pressure: a real ferryd (client SQs of 64
// entries), a real `ferry-ps server` (response pool of 128: more replies
// than its SQ holds, now that its small requests arrive inline and need no
// ReleaseRx) and this process as the worker. The shard is stopped while
// 200 push requests reach its completion ring; then ferryd is stopped and
// the shard resumed, so the shard answers into a submission ring nobody
// drains: its Replies are refused Busy once the ring fills, and requests
// beyond the pool wait for a buffer. Then ferryd resumes. Asserted: every
// push completes once, Ok, with its own request id; every push was applied
// exactly once (the rows pulled afterwards equal a local reference that
// applied the same pushes, exactly: gradients of 1 and a learning rate of
// 1/8 keep float sums exact in any order); and the shard reports that both
// paths ran (refused Replies sent again, requests that waited), so the test
// cannot pass without them.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "ferry/client.h"
#include "ferry/ps/shard.h"
#include "ferry/ps/shard_link.h"
#include "ferry/ps/wire.h"
#include "ps_workload.h"
#include "tests/integration/harness.h"
#include "tests/ps/made.h"

using namespace ferry;
using namespace ferry::ps;
using namespace ferry::ps::test;
using namespace ferry::itest;

namespace {

constexpr std::uint32_t kPushes = 200;
constexpr std::uint32_t kKeys = 1000;
constexpr std::uint32_t kDim = 4;
constexpr std::uint32_t kTouched = 10;  // pushes go to keys 0..9, 20 each

std::uint64_t key_of(std::uint32_t i) { return i % kTouched; }

std::size_t make_push(std::byte* out, std::uint32_t i) {
  Header h;
  h.op = static_cast<std::uint8_t>(Op::Push);
  h.table = tool::kRowsTable;
  h.count = 1;
  h.dim = kDim;
  h.request_id = i;
  std::memcpy(out, &h, sizeof h);
  const Key k = key_of(i);
  std::memcpy(out + kHeaderBytes, &k, sizeof k);
  const float g[kDim] = {1.0f, 1.0f, 1.0f, 1.0f};
  std::memcpy(out + kHeaderBytes + 8, g, sizeof g);
  return request_bytes(Op::Push, TableKind::Embedding, 1, kDim);
}

std::size_t make_pull(std::byte* out, std::uint32_t request_id) {
  Header h;
  h.op = static_cast<std::uint8_t>(Op::Pull);
  h.table = tool::kRowsTable;
  h.count = kTouched;
  h.dim = kDim;
  h.request_id = request_id;
  std::memcpy(out, &h, sizeof h);
  for (std::uint32_t k = 0; k < kTouched; ++k) {
    const Key key = k;
    std::memcpy(out + kHeaderBytes + 8 * k, &key, sizeof key);
  }
  return request_bytes(Op::Pull, TableKind::Embedding, kTouched, kDim);
}

// The shard `ferry-ps server --shard 0/1 --keys kKeys --dim kDim --batch 16` runs.
ShardSpec server_spec() {
  tool::Workload w;
  w.shards = 1;
  w.keys = kKeys;
  w.dim = kDim;
  w.batch = 16;
  return tool::workload_shard(w, 0.125, 0);
}

// `ferry-ps server` for shard 0 of 1 on `socket`, stderr into `log`.
pid_t start_shard(const std::string& socket, const std::string& log) {
  const char* ps = std::getenv("FERRY_PS");
  REQUIRE(ps != nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::FILE* f = std::fopen(log.c_str(), "w");
    if (f != nullptr) ::dup2(::fileno(f), 2);
    const std::string keys = std::to_string(kKeys), dim = std::to_string(kDim);
    ::execl(ps, ps, "server", "--shard", "0/1", "--keys", keys.c_str(), "--dim", dim.c_str(), "--transport", "ferry",
            "--socket", socket.c_str(), "--shard-pool", "128", "--batch", "16", static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  return pid;
}

std::uint64_t reported(const std::string& text, const std::string& what) {
  std::smatch m;
  const std::regex re("ferry-ps shard 0: ([0-9]+) " + what);
  return std::regex_search(text, m, re) ? std::stoull(m[1].str()) : 0;
}

}  // namespace

TEST_CASE(
    "shard under back-pressure: refused Replies go again, waiting requests are answered, each push applied once") {
  Daemon d({"--transport", "tcp", "--sq-entries", "64"});
  const std::string log = d.dir() + "/shard.log";
  const pid_t shard = start_shard(d.socket(), log);

  auto c = attach_retry(d.socket(), "shard-backpressure-worker");
  REQUIRE(c);
  auto ep = open_retry(*c, shard_service("ps-shard-", 0), 10s);
  REQUIRE(ep);

  std::vector<Buffer> req(kPushes), resp(kPushes);
  for (std::uint32_t i = 0; i < kPushes; ++i) {
    req[i] = c->alloc(request_bytes(Op::Push, TableKind::Embedding, 1, kDim));
    resp[i] = c->alloc(kAckBytes);
    REQUIRE(req[i]);
    REQUIRE(resp[i]);
  }
  const long calls_before = d.status_number("calls");
  REQUIRE(calls_before >= 0);

  // 1. The shard stopped: every push reaches its completion ring.
  REQUIRE(stop_process(shard, 5s));  // every thread stopped, not merely signalled
  std::vector<int> done(kPushes, 0);
  std::uint32_t completed = 0;
  std::vector<Completion> batch(64);
  auto collect = [&](std::chrono::milliseconds wait) {
    const std::size_t n = c->wait(batch, wait);
    for (std::size_t k = 0; k < n; ++k) {
      const Completion& x = batch[k];
      REQUIRE(x.kind == Completion::Kind::OpDone);
      REQUIRE(x.op == OpKind::Call);
      REQUIRE(x.user_data < kPushes);
      INFO("push " << x.user_data << ": " << to_string(x.status));
      REQUIRE(x.status == Status::Ok);
      REQUIRE(classify_response(resp[x.user_data].data, x.length, kAckBytes, Op::Push) == PsStatus::Ok);
      std::uint32_t applied = 0;
      std::memcpy(&applied, resp[x.user_data].data, sizeof applied);
      REQUIRE(applied == 1);
      ++done[x.user_data];
      ++completed;
    }
  };
  for (std::uint32_t i = 0; i < kPushes;) {
    const std::size_t len = make_push(req[i].data, i);
    const Status s = c->call(ep.value, req[i], static_cast<std::uint32_t>(len), resp[i], i);
    if (s == Status::Busy) {  // our own ring is full: let the daemon take it
      collect(5ms);
      continue;
    }
    REQUIRE(s == Status::Ok);
    ++i;
  }
  const auto deadline = Clock::now() + 10s;
  while (d.status_number("calls") < calls_before + static_cast<long>(kPushes)) {
    REQUIRE(Clock::now() < deadline);
    std::this_thread::sleep_for(20ms);  // polling ferryctl with a deadline
  }
  CHECK(completed == 0);  // nothing can be answered while the shard is stopped

  // 2. ferryd stopped, the shard resumed: it answers into a ring nobody
  // drains. The pause is the fault's length, not a condition to wait for:
  // the shard needs microseconds per request; the report below proves the
  // refused path ran.
  REQUIRE(stop_process(d.pid(), 5s));
  REQUIRE(::kill(shard, SIGCONT) == 0);
  std::this_thread::sleep_for(1500ms);
  REQUIRE(::kill(d.pid(), SIGCONT) == 0);

  // 3. Every push completes exactly once, Ok.
  const auto all_by = Clock::now() + 20s;
  while (completed < kPushes && Clock::now() < all_by) collect(100ms);
  CHECK(completed == kPushes);
  for (std::uint32_t i = 0; i < kPushes; ++i) {
    INFO("push " << i);
    CHECK(done[i] == 1);
  }
  collect(200ms);  // nothing more may come
  CHECK(completed == kPushes);

  // 4. Each push applied once: the rows equal a reference that applied them once.
  const auto reference_made = made_shard(server_spec());
  Shard& reference = *reference_made;
  std::vector<std::byte> scratch(request_bytes(Op::Push, TableKind::Embedding, kTouched, kDim));
  std::vector<std::byte> ref_resp(response_bytes(Op::Pull, kTouched, kDim));
  for (std::uint32_t i = 0; i < kPushes; ++i) {
    const std::size_t len = make_push(scratch.data(), i);
    REQUIRE(reference.handle({scratch.data(), len}, {ref_resp.data(), ref_resp.size()}) == kAckBytes);
  }
  const std::size_t pull_len = make_pull(scratch.data(), 9999);
  const std::size_t ref_len = reference.handle({scratch.data(), pull_len}, {ref_resp.data(), ref_resp.size()});
  REQUIRE(ref_len == ref_resp.size());
  Buffer pq = c->alloc(pull_len), pr = c->alloc(ref_resp.size());
  REQUIRE(pq);
  REQUIRE(pr);
  std::memcpy(pq.data, scratch.data(), pull_len);
  REQUIRE(c->call(ep.value, pq, static_cast<std::uint32_t>(pull_len), pr, 9999) == Status::Ok);
  std::size_t got = 0;
  for (auto until = Clock::now() + 10s; got == 0 && Clock::now() < until;) got = c->wait(batch, 100ms);
  REQUIRE(got == 1);
  REQUIRE(batch[0].status == Status::Ok);
  REQUIRE(batch[0].length == ref_len);
  CHECK(std::memcmp(pr.data, ref_resp.data(), ref_len) == 0);

  // 5. The shard says both back-pressure paths ran.
  c.reset();
  REQUIRE(::kill(shard, SIGTERM) == 0);
  CHECK(reap(shard, 10s) == 0);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  std::printf("shard stderr:\n%s", text.str().c_str());
  CHECK(reported(text.str(), "replies refused Busy and sent again") > 0);
  CHECK(reported(text.str(), "requests waited for a response buffer") > 0);
}
