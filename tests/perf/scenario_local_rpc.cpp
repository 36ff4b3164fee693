// local-rpc: calls through the daemon to a server process on this host
// (remote-rpc runs the same pump against a server on another daemon).
// ferry-bench forks the bench-echo server (local_rpc_server.cpp) on the
// daemon at --server-socket, opens "bench-echo" from the daemon at
// --socket and issues calls whose responses land in caller-supplied
// buffers, keeping --concurrency calls outstanding. A call's latency is
// submit to its OpDone being seen.
#include <array>
#include <vector>

#include "echo_rpc.h"
#include "ferry_session.h"
#include "forked_server.h"
#include "local_rpc_server.h"
#include "payload.h"
#include "scenarios.h"

namespace ferry::bench {

namespace {

struct CallSlot {
  Buffer request;
  Buffer response;
  std::uint64_t seq = 0;
  SteadyClock::time_point issued{};
};

class CallPump {
 public:
  CallPump(Client& client, EndpointId endpoint, std::size_t size, bool busy_poll)
      : client_(client), busy_poll_(busy_poll), endpoint_(endpoint), size_(size) {
    expected_.resize(size);
    fill_pattern(expected_.data(), size, kResponseSeed);
  }

  bool allocate(std::uint32_t concurrency) {
    for (std::uint32_t i = 0; i < concurrency; ++i) {
      CallSlot s;
      s.request = client_.alloc(size_);
      s.response = client_.alloc(size_);
      if (!s.request || !s.response) return false;
      fill_pattern(s.request.data, size_, kRequestSeed);
      slots_.push_back(s);
    }
    ready_.reserve(concurrency);
    return true;
  }

  // Runs calls until `keep_going(issued)` is false and all have completed.
  // Records latencies into ctx when `measure`. nullptr or an error.
  template <typename KeepGoing>
  const char* run(KeepGoing keep_going, ScenarioContext* measure) {
    std::uint64_t issued = 0, completed = 0;
    ready_.clear();
    for (std::uint32_t i = 0; i < slots_.size(); ++i) ready_.push_back(i);
    for (;;) {
      // Issue on every free slot; Busy (SQ full) leaves it for later.
      while (!ready_.empty() && keep_going(issued)) {
        CallSlot& s = slots_[ready_.back()];
        s.seq = next_seq_;
        stamp(s.request.data, size_, s.seq);
        s.issued = SteadyClock::now();
        const Status st =
            client_.call(endpoint_, s.request, static_cast<std::uint32_t>(size_), s.response, ready_.back());
        if (st == Status::Busy) break;
        if (st != Status::Ok) return "call rejected";
        ++next_seq_;
        ++issued;
        ready_.pop_back();
      }
      if (completed == issued && (ready_.size() == slots_.size()) && !keep_going(issued)) return nullptr;
      const std::size_t n = wait_completions(client_, batch_, busy_poll_);
      const auto now = SteadyClock::now();
      if (n == 0) return client_.state() == Status::Ok ? "timed out waiting for a call to complete" : "daemon gone";
      for (std::size_t i = 0; i < n; ++i) {
        const Completion& c = batch_[i];
        if (c.kind != Completion::Kind::OpDone || c.op != OpKind::Call || c.user_data >= slots_.size()) {
          if (c.kind == Completion::Kind::OpDone && c.op == OpKind::ReleaseRx) continue;
          return "unexpected completion";
        }
        if (c.status != Status::Ok) {
          last_status_ = c.status;
          return "call completed with an error status";
        }
        CallSlot& s = slots_[c.user_data];
        if (c.length != size_) return "response length differs from request length";
        if (!stamp_matches(s.response.data, size_, s.seq)) return "response stamp mismatch";
        if (measure) {
          measure->record(now - s.issued);
          // Sampled full comparison; after `now` was taken, so not timed.
          if (s.seq % kVerifyEvery == 0) {
            if (!payload_matches(s.response.data, expected_.data(), size_, s.seq)) return "response payload corrupted";
            measure->count_verified();
          }
        }
        ++completed;
        ready_.push_back(static_cast<std::uint32_t>(c.user_data));
      }
    }
  }

  Status last_status() const { return last_status_; }

 private:
  Client& client_;
  bool busy_poll_;
  EndpointId endpoint_;
  std::size_t size_;
  std::vector<CallSlot> slots_;
  std::vector<std::uint32_t> ready_;
  std::vector<std::byte> expected_;
  std::array<Completion, kCompletionBatch> batch_{};
  std::uint64_t next_seq_ = 0;
  Status last_status_ = Status::Ok;
};

}  // namespace

Outcome run_echo_rpc(ScenarioContext& ctx, const std::string& target, const std::string& client_name) {
  const BenchOptions& o = ctx.options();
  const std::size_t size = ctx.size();

  // Fork before attaching: the child attaches on its own.
  ForkedServer server;
  Error error = server.start([&](ReadyNotifier& ready) {
    return serve_bench_echo(o.server_socket, size, o.concurrency, o.busy_poll, o.server_delay_us, ready);
  });
  if (error.ok()) error = server.wait_ready(std::chrono::seconds(15), nullptr);
  if (error.failed()) return ctx.fail(Outcome::Failed, "bench-echo server: " + error.message());

  std::unique_ptr<Client> client;
  if (const Error e = attach_bench_client(o.socket, client_name, 2 * size * o.concurrency, 0, &client, o.busy_poll);
      e.failed())
    return ctx.fail(Outcome::Failed, e.message());
  if (const Error e = size_fits(*client, size); e.failed()) return ctx.fail(Outcome::Failed, e.message());
  const auto opened = client->open(target);
  if (!opened) return ctx.fail(Outcome::Failed, "open " + target + ": " + std::string(to_string(opened.status)));
  CallPump pump(*client, opened.value, size, o.busy_poll);
  if (!pump.allocate(o.concurrency))
    return ctx.fail(Outcome::Failed,
                    "cannot allocate " + std::to_string(o.concurrency) + " request/response buffer pairs");
  ctx.cpu().add_process(server.pid());
  charge_daemons(ctx);

  const std::uint64_t warmup = ctx.warmup_ops();
  if (const char* err = pump.run([&](std::uint64_t issued) { return issued < warmup; }, nullptr))
    return ctx.fail(Outcome::Failed,
                    std::string("warm-up: ") + err + " (" + std::string(to_string(pump.last_status())) + ")");
  ctx.begin_measured();
  const char* err = pump.run([&](std::uint64_t issued) { return ctx.more(issued); }, &ctx);
  ctx.end_measured();
  if (err) return ctx.fail(Outcome::Failed, std::string(err) + " (" + std::string(to_string(pump.last_status())) + ")");

  (void)client->close(opened.value);
  client.reset();  // detach before stopping the server
  const int rc = server.stop(std::chrono::seconds(5));
  if (rc != 0) return ctx.fail(Outcome::Failed, "bench-echo server exited with " + std::to_string(rc));
  return Outcome::Ok;
}

Outcome run_local_rpc(ScenarioContext& ctx) { return run_echo_rpc(ctx, bench_echo_service(), "ferry-bench local-rpc"); }

}  // namespace ferry::bench
