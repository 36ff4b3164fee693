// ferry-ps: a sharded parameter server (embedding rows + a dense table)
// over ferry or kernel TCP, built on the parameter-server library
// (ferry/ps/), its benchmark and its deterministic check.
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "bench_worker.h"
#include "ps_commands.h"
#include "ps_fleet.h"
#include "shard_process.h"

namespace ferry::ps::tool {

namespace {

int g_stop_write_fd = -1;

void on_signal(int) {
  // close() is async-signal-safe; the serving loop sees EOF on its stop fd.
  if (g_stop_write_fd >= 0) ::close(g_stop_write_fd);
  g_stop_write_fd = -1;
}

}  // namespace

int run_server(const PsOptions& o) {
  int stop[2];
  if (::pipe(stop) != 0) return 1;
  g_stop_write_fd = stop[1];
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  std::unique_ptr<Shard> shard;
  if (const Error bad = Shard::create(workload_shard(o.workload, o.lr, o.shard_index), &shard); bad.failed()) {
    std::fprintf(stderr, "ferry-ps: %s\n", bad.message().c_str());
    return 2;
  }
  ShardProcessSpec spec;
  spec.kind = o.transport;
  spec.socket = o.socket;
  spec.listen = o.listen.empty() ? "127.0.0.1:0" : o.listen;
  spec.pool = o.shard_pool != 0 ? o.shard_pool : 64;
  spec.busy_poll = o.busy_poll;
  spec.reattach_ms = o.reattach_s * 1000;
  spec.stop_fd = stop[0];
  spec.ready = [&](const std::string& info) {
    std::printf("ready %s %s\n", shard_service("ps-shard-", o.shard_index).c_str(), info.c_str());
    std::fflush(stdout);
  };
  spec.failed = [](const std::string& why) { std::fprintf(stderr, "ferry-ps server: %s\n", why.c_str()); };
  const int rc = serve_shard(*shard, spec);
  std::printf("served %llu requests (%llu rejected)\n", static_cast<unsigned long long>(shard->counters().requests),
              static_cast<unsigned long long>(shard->counters().rejected));
  return rc;
}

int run_worker(const PsOptions& o) {
  std::unique_ptr<Worker> w;
  if (const Error e = make_worker(o, o.shard_addresses, "ferry-ps worker " + std::to_string(o.worker_id), &w);
      e.failed()) {
    std::fprintf(stderr, "ferry-ps worker: %s\n", e.message().c_str());
    return 1;
  }
  BenchWorker worker(*w, o.workload, o.worker_id);
  bench::LatencyRecorder pulls(o.iters), pushes(o.iters);
  for (std::uint32_t it = 0; it < o.iters; ++it) {
    if (const Error e = worker.iterate(it, &pulls, &pushes); e.failed()) {
      std::fprintf(stderr, "ferry-ps worker: iteration %u: %s\n", it, e.message().c_str());
      return 1;
    }
  }
  const auto pull = bench::summarize(pulls.samples());
  const auto push = bench::summarize(pushes.samples());
  std::printf("worker %u: pull mean %.1f us p99 %.1f us; push mean %.1f us p99 %.1f us; checksum %.3f\n", o.worker_id,
              pull.mean_us, pull.p99_us, push.mean_us, push.p99_us, worker.checksum());
  return 0;
}

}  // namespace ferry::ps::tool

int main(int argc, char** argv) {
  using namespace ferry::ps::tool;
  ::signal(SIGPIPE, SIG_IGN);  // a dead peer is an error return, not a kill
  PsOptions o;
  if (const int rc = parse_options(argc, argv, &o); rc >= 0) return rc;
  switch (o.command) {
    case Command::Server: return run_server(o);
    case Command::Worker: return run_worker(o);
    case Command::Bench: return run_bench(o);
    case Command::Check: return run_check(o);
  }
  return 2;
}
