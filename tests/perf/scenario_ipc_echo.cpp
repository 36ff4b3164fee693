// ipc-echo: one client serves a service and opens an endpoint to it, then
// sends to itself: SQ ring -> daemon engine -> delivery into its own rx
// arena -> CQ. The latency of one op is send-submitted to delivery-seen;
// each delivery is released and the send's OpDone awaited before the next
// op (the buffer is ours again only then). With --concurrency N, N sends
// are kept in flight, each on its own buffer and resubmitted as soon as
// its delivery and OpDone are in: one client process that keeps the
// engine busy (how many messages one engine forwards at saturation).
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

// --concurrency N: N sends in flight on N buffers.
class PipelinedEcho {
 public:
  PipelinedEcho(Client& client, ServiceId service, EndpointId endpoint, std::vector<Buffer> buffers, std::size_t size,
                bool busy_poll)
      : client_(client),
        busy_poll_(busy_poll),
        service_(service),
        endpoint_(endpoint),
        buffers_(std::move(buffers)),
        size_(size),
        slots_(buffers_.size()) {
    for (const Buffer& b : buffers_) fill_pattern(b.data, size_, kRequestSeed);
  }

  // Runs until `more(i)` is false for the next op to start; records each
  // delivered op's latency when `measure`. nullptr or an error.
  template <typename More, typename Record>
  const char* run(More&& more, Record&& record) {
    std::uint64_t started = 0;
    std::size_t in_flight = 0;
    for (std::size_t k = 0; k < slots_.size() && more(started); ++k, ++started) {
      if (const char* err = submit(k)) return err;
      ++in_flight;
    }
    while (in_flight != 0) {
      const std::size_t n = wait_completions(client_, batch_, busy_poll_);
      if (n == 0) return client_.state() == Status::Ok ? "timed out waiting for delivery" : "daemon gone";
      for (std::size_t i = 0; i < n; ++i) {
        const Completion& c = batch_[i];
        std::size_t k = 0;
        if (c.kind == Completion::Kind::Message) {
          const std::uint64_t s = read_stamp(c.data, size_);
          k = static_cast<std::size_t>(s % slots_.size());
          if (c.handle != service_ || c.length != size_ || slots_[k].seq != s || !stamp_matches(c.data, size_, s)) {
            return "delivered message differs from the one sent";
          }
          record(SteadyClock::now() - slots_[k].t0);
          slots_[k].delivered = true;
          client_.release(c);
        } else if (c.kind == Completion::Kind::OpDone && c.op == OpKind::Send) {
          if (c.status != Status::Ok) return "send completed with an error status";
          k = static_cast<std::size_t>(c.user_data % slots_.size());
          slots_[k].done = true;
        } else if (c.kind == Completion::Kind::OpDone && c.op == OpKind::ReleaseRx) {
          if (c.status != Status::Ok) return "release of a delivery failed";
          continue;
        } else {
          return "unexpected completion";
        }
        if (!slots_[k].delivered || !slots_[k].done) continue;
        --in_flight;
        if (!more(started)) continue;
        ++started;
        if (const char* err = submit(k)) return err;
        ++in_flight;
      }
    }
    return nullptr;
  }

 private:
  struct Slot {
    std::uint64_t seq = 0;
    std::uint64_t round = 0;
    SteadyClock::time_point t0;
    bool delivered = false, done = false;
  };
  // Slot k carries the sequence numbers k, k + N, k + 2N, ...: a
  // completion (its stamp, its user_data) names its slot.
  const char* submit(std::size_t k) {
    Slot& slot = slots_[k];
    const std::uint64_t s = slot.round++ * slots_.size() + k;
    slot.seq = s;
    slot.t0 = SteadyClock::now();
    slot.delivered = slot.done = false;
    stamp(buffers_[k].data, size_, s);
    Status st;
    while ((st = client_.send(endpoint_, buffers_[k], static_cast<std::uint32_t>(size_), s)) == Status::Busy) {
      const std::size_t n = client_.poll(batch_);
      if (n == 0 && client_.state() != Status::Ok) return "daemon gone";
      if (n != 0) return "submission ring full with completions waiting";  // cannot happen: N is below the SQ
    }
    return st == Status::Ok ? nullptr : "send rejected";
  }

  Client& client_;
  bool busy_poll_;
  ServiceId service_;
  EndpointId endpoint_;
  std::vector<Buffer> buffers_;
  std::size_t size_;
  std::vector<Slot> slots_;
  std::array<Completion, kCompletionBatch> batch_{};
};

}  // namespace

Outcome run_ipc_echo(ScenarioContext& ctx) {
  const std::size_t size = ctx.size();
  const std::uint32_t concurrency = ctx.options().concurrency;
  if (concurrency == 0 || concurrency > 256) {
    return ctx.fail(Outcome::BadUsage, "ipc-echo: --concurrency must be 1..256");
  }
  if (concurrency > 1 && size < 8) return ctx.fail(Outcome::BadUsage, "ipc-echo --concurrency: --size 8 or more");
  std::unique_ptr<Client> client;
  if (const Error e = attach_bench_client(ctx.options().socket, "ferry-bench ipc-echo", size, size, &client);
      e.failed())
    return ctx.fail(Outcome::Failed, e.message());
  if (const Error e = size_fits(*client, size); e.failed()) return ctx.fail(Outcome::Failed, e.message());

  // Per-process name: two ipc-echo runs on one daemon must not collide.
  const std::string name = "bench-ipc-echo-" + std::to_string(::getpid());
  const auto served = client->serve(name);
  if (!served) return ctx.fail(Outcome::Failed, "serve " + name + ": " + std::string(to_string(served.status)));
  const auto opened = client->open(name);
  if (!opened) return ctx.fail(Outcome::Failed, "open " + name + ": " + std::string(to_string(opened.status)));
  const Buffer buffer = client->alloc(size);
  if (!buffer) return ctx.fail(Outcome::Failed, "cannot allocate a " + std::to_string(size) + "-byte tx buffer");
  charge_daemons(ctx);
  if (concurrency > 1) {
    std::vector<Buffer> buffers{buffer};
    for (std::uint32_t k = 1; k < concurrency; ++k) {
      buffers.push_back(client->alloc(size));
      if (!buffers.back()) return ctx.fail(Outcome::Failed, "cannot allocate the tx buffers");
    }
    PipelinedEcho pipe(*client, served.value, opened.value, buffers, size, ctx.options().busy_poll);
    const std::uint64_t warmup = ctx.warmup_ops();
    if (const char* err = pipe.run([&](std::uint64_t i) { return i < warmup; }, [](auto) {}))
      return ctx.fail(Outcome::Failed, std::string("warm-up: ") + err);
    ctx.begin_measured();
    const char* err = pipe.run([&](std::uint64_t i) { return ctx.more(i); },
                               [&](auto latency) {
                                 ctx.record(latency);
                                 ctx.count_verified();
                               });
    ctx.end_measured();
    if (err != nullptr) return ctx.fail(Outcome::Failed, err);
    for (const Buffer& b : buffers) (void)client->free(b);  // our own arena buffer: cannot fail
    (void)client->close(opened.value);
    (void)client->unserve(served.value);
    return Outcome::Ok;
  }

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
  (void)client->free(buffer);  // our own arena buffer: cannot fail
  (void)client->close(opened.value);
  (void)client->unserve(served.value);
  return Outcome::Ok;
}

}  // namespace ferry::bench
