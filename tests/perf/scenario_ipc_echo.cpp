// ipc-echo: one client serves a service and opens an endpoint to it, then
// sends to itself: SQ ring -> daemon engine -> delivery into its own rx
// arena -> CQ. The latency of one op is send-submitted to delivery-seen;
// each delivery is released and the send's OpDone awaited before the next
// op (the buffer is ours again only then).
#include <unistd.h>

#include <array>
#include <vector>

#include "ferry_session.h"
#include "payload.h"
#include "scenarios.h"

namespace ferry::bench {

namespace {

class EchoLoop {
 public:
  EchoLoop(Client& client, ServiceId service, EndpointId endpoint, Buffer buffer, std::size_t size, bool busy_poll)
      : client_(client),
        busy_poll_(busy_poll),
        service_(service),
        endpoint_(endpoint),
        buffer_(buffer),
        size_(size),
        expected_(size) {
    fill_pattern(buffer_.data, size_, kRequestSeed);
    fill_pattern(expected_.data(), size_, kRequestSeed);
  }

  // One send and its delivery; *latency set on success. nullptr or an error.
  const char* one(std::uint64_t seq, bool full_check, SteadyClock::duration* latency) {
    stamp(buffer_.data, size_, seq);
    const auto t0 = SteadyClock::now();
    Status s;
    while ((s = client_.send(endpoint_, buffer_, static_cast<std::uint32_t>(size_), seq)) == Status::Busy) {
      // Only releases can fill the SQ here (one send in flight at most).
      if (const char* err = drain_stale()) return err;
    }
    if (s != Status::Ok) return "send rejected";
    bool delivered = false, done = false;
    while (!delivered || !done) {
      const std::size_t n = wait_completions(client_, batch_, busy_poll_);
      if (n == 0) return client_.state() == Status::Ok ? "timed out waiting for delivery" : "daemon gone";
      for (std::size_t i = 0; i < n; ++i) {
        const Completion& c = batch_[i];
        if (c.kind == Completion::Kind::Message) {
          if (latency && !delivered) *latency = SteadyClock::now() - t0;
          delivered = true;
          const bool ok =
              c.handle == service_ && c.length == size_ &&
              (full_check ? payload_matches(c.data, expected_.data(), size_, seq) : stamp_matches(c.data, size_, seq));
          client_.release(c);
          if (!ok) return "delivered message differs from the one sent";
        } else if (c.kind == Completion::Kind::OpDone && c.op == OpKind::Send) {
          if (c.status != Status::Ok) {
            last_status_ = c.status;
            return "send completed with an error status";
          }
          if (c.user_data != seq) return "send completion for an unexpected operation";
          done = true;
        } else if (c.kind == Completion::Kind::OpDone && c.op == OpKind::ReleaseRx) {
          if (c.status != Status::Ok) return "release of a delivery failed";
        } else {
          return "unexpected completion";
        }
      }
    }
    return nullptr;
  }

  Status last_status() const { return last_status_; }

 private:
  // The SQ was full: let the daemon make progress by consuming completions.
  const char* drain_stale() {
    const std::size_t n = client_.poll(batch_);
    for (std::size_t i = 0; i < n; ++i) {
      if (batch_[i].kind == Completion::Kind::Message) client_.release(batch_[i]);
    }
    return n == 0 && client_.state() != Status::Ok ? "daemon gone" : nullptr;
  }

  Client& client_;
  bool busy_poll_;
  ServiceId service_;
  EndpointId endpoint_;
  Buffer buffer_;
  std::size_t size_;
  std::vector<std::byte> expected_;
  std::array<Completion, kCompletionBatch> batch_{};
  Status last_status_ = Status::Ok;
};

}  // namespace

Outcome run_ipc_echo(ScenarioContext& ctx) {
  const std::size_t size = ctx.size();
  if (ctx.options().concurrency != 1)
    return ctx.fail(Outcome::BadUsage, "ipc-echo measures one message at a time: --concurrency must be 1");
  std::string error;
  auto client = attach_bench_client(ctx.options().socket, "ferry-bench ipc-echo", size, size, &error);
  if (!client) return ctx.fail(Outcome::Failed, error);
  if (!size_fits(*client, size, &error)) return ctx.fail(Outcome::Failed, error);

  // Per-process name: two ipc-echo runs on one daemon must not collide.
  const std::string name = "bench-ipc-echo-" + std::to_string(::getpid());
  const auto served = client->serve(name);
  if (!served) return ctx.fail(Outcome::Failed, "serve " + name + ": " + std::string(to_string(served.status)));
  const auto opened = client->open(name);
  if (!opened) return ctx.fail(Outcome::Failed, "open " + name + ": " + std::string(to_string(opened.status)));
  const Buffer buffer = client->alloc(size);
  if (!buffer) return ctx.fail(Outcome::Failed, "cannot allocate a " + std::to_string(size) + "-byte tx buffer");
  charge_daemons(ctx);

  EchoLoop loop(*client, served.value, opened.value, buffer, size, ctx.options().busy_poll);
  std::uint64_t seq = 0;
  for (std::uint64_t i = 0; i < ctx.warmup_ops(); ++i, ++seq) {
    if (const char* err = loop.one(seq, true, nullptr))
      return ctx.fail(Outcome::Failed,
                      std::string("warm-up: ") + err + " (" + std::string(to_string(loop.last_status())) + ")");
  }
  ctx.begin_measured();
  for (std::uint64_t i = 0; ctx.more(i); ++i, ++seq) {
    const bool full = (i % kVerifyEvery) == 0;
    SteadyClock::duration latency{};
    if (const char* err = loop.one(seq, full, &latency)) {
      ctx.end_measured();
      return ctx.fail(Outcome::Failed, std::string(err) + " (" + std::string(to_string(loop.last_status())) + ")");
    }
    ctx.record(latency);
    if (full) ctx.count_verified();
  }
  ctx.end_measured();
  client->free(buffer);
  client->close(opened.value);
  client->unserve(served.value);
  return Outcome::Ok;
}

}  // namespace ferry::bench
