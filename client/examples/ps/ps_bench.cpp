// ferry-ps bench: shards + workers, a measured phase bracketed by CPU
// readings of every process involved (workers report their own, shards are
// read from /proc, daemons over their control sockets), then the report.
#include <sys/resource.h>

#include <cstdio>
#include <fstream>

#include "control/control_client.h"
#include "cpu_accounting.h"
#include "daemon_cpu.h"
#include "latency_stats.h"
#include "ps_commands.h"
#include "ps_fleet.h"

namespace ferry::ps::tool {

namespace {

// The daemon's pid from its status, for its peak RSS; 0 when unknown.
pid_t daemon_pid(const std::string& control) {
  const auto reply = control::call(control, control::Command::Status, std::chrono::milliseconds(2000));
  if (!reply.ok()) return 0;
  const json::Value* pid = reply.result.find("pid");
  const auto v = pid ? pid->as_int() : std::nullopt;
  return v ? static_cast<pid_t>(*v) : 0;
}

std::vector<std::string> daemon_controls(const PsOptions& o) {
  std::vector<std::string> controls;
  if (o.transport != TransportKind::Ferry) return controls;
  controls.push_back(bench::control_path_for(o.socket));
  const std::string server = bench::control_path_for(o.server_socket);
  if (server != controls[0]) controls.push_back(server);
  return controls;
}

void print_summary(const char* name, const bench::LatencySummary& s) {
  std::printf("%-5s n=%-8llu mean %8.1f us  p50 %8.1f  p99 %8.1f  p999 %8.1f  max %8.1f\n", name,
              static_cast<unsigned long long>(s.samples), s.mean_us, s.p50_us, s.p99_us, s.p999_us, s.max_us);
}

}  // namespace

int run_bench(const PsOptions& o) {
  Fleet fleet(o);
  Error error = fleet.start_shards();
  if (error.ok()) error = fleet.start_workers();
  if (error.failed()) {
    std::fprintf(stderr, "ferry-ps bench: %s\n", error.message().c_str());
    return 1;
  }
  bench::CpuMeter meter;
  for (const pid_t pid : fleet.shard_pids()) meter.add_process(pid);
  const auto controls = daemon_controls(o);
  for (const auto& c : controls) meter.add_daemon(c);

  meter.begin();
  const auto t0 = bench::SteadyClock::now();
  fleet.go();
  std::vector<WorkerReport> reports;
  error = fleet.collect(&reports);
  const double wall_s = std::chrono::duration<double>(bench::SteadyClock::now() - t0).count();
  const bench::CpuReport cpu = meter.end();
  std::uint64_t rss_kb = fleet.shards_rss_kb();
  for (const auto& c : controls)
    if (const pid_t pid = daemon_pid(c)) rss_kb += peak_rss_kb(pid);
  const Error stopped = fleet.stop_shards();
  if (error.failed() || stopped.failed()) {
    std::fprintf(stderr, "ferry-ps bench: %s\n", error.failed() ? error.message().c_str() : stopped.message().c_str());
    return 1;
  }

  std::vector<std::uint64_t> pulls, pushes;
  std::uint64_t worker_cpu = 0, keys = 0;
  for (const auto& r : reports) {
    pulls.insert(pulls.end(), r.pull_ns.begin(), r.pull_ns.end());
    pushes.insert(pushes.end(), r.push_ns.begin(), r.push_ns.end());
    worker_cpu += r.cpu_us;
    rss_kb += r.maxrss_kb;
    keys += r.keys_pulled;
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  rss_kb += static_cast<std::uint64_t>(ru.ru_maxrss);
  const std::uint64_t ops = pulls.size() + pushes.size();
  const std::uint64_t cpu_total = cpu.total_us() + worker_cpu;

  if (!o.latency_dump.empty()) {
    std::ofstream dump(o.latency_dump);
    dump << "# ferry-ps " << to_string(o.transport) << " latencies: op microseconds\n";
    for (const auto ns : pulls) dump << "pull " << static_cast<double>(ns) / 1000.0 << '\n';
    for (const auto ns : pushes) dump << "push " << static_cast<double>(ns) / 1000.0 << '\n';
    if (!dump) std::fprintf(stderr, "ferry-ps bench: cannot write %s\n", o.latency_dump.c_str());
  }
  const bench::LatencySummary pull = bench::summarize(pulls);
  const bench::LatencySummary push = bench::summarize(pushes);
  const double ops_per_s = static_cast<double>(ops) / wall_s;
  const double cpu_per_op = ops ? static_cast<double>(cpu_total) / static_cast<double>(ops) : 0;

  std::printf(
      "ferry-ps bench: transport %s, %u workers x %u shards, %llu keys, dim %u, batch %u, %u iters%s\n",
      std::string(to_string(o.transport)).c_str(), o.workers, o.workload.shards,
      static_cast<unsigned long long>(o.workload.keys), o.workload.dim, o.workload.batch, o.iters,
      o.rate > 0 ? (", open loop at " + std::to_string(static_cast<long long>(o.rate)) + " ops/s").c_str() : "");
  print_summary("pull", pull);
  print_summary("push", push);
  std::printf(
      "ops/s %.0f  keys/s %.0f  cpu %.1f us/op (workers %llu, shards %llu, daemons %llu, self %llu us)  rss %llu kB\n",
      ops_per_s, static_cast<double>(keys) / wall_s, cpu_per_op, static_cast<unsigned long long>(worker_cpu),
      static_cast<unsigned long long>(cpu.servers_us), static_cast<unsigned long long>(cpu.daemon_us),
      static_cast<unsigned long long>(cpu.self_us), static_cast<unsigned long long>(rss_kb));
  if (o.json) {
    std::printf(
        "{\"transport\":\"%s\",\"workers\":%u,\"shards\":%u,\"keys\":%llu,\"dim\":%u,\"batch\":%u,\"iters\":%u,"
        "\"pulls\":%llu,\"pushes\":%llu,\"ops\":%llu,"
        "\"pull_mean_us\":%.3f,\"pull_p50_us\":%.3f,\"pull_p99_us\":%.3f,\"pull_p999_us\":%.3f,\"pull_max_us\":%.3f,"
        "\"push_mean_us\":%.3f,\"push_p50_us\":%.3f,\"push_p99_us\":%.3f,\"push_p999_us\":%.3f,\"push_max_us\":%.3f,"
        "\"ops_per_s\":%.1f,\"keys_per_s\":%.1f,\"wall_s\":%.4f,\"cpu_us_per_op\":%.3f,\"cpu_total_us\":%llu,"
        "\"cpu_workers_us\":%llu,\"cpu_shards_us\":%llu,\"cpu_daemons_us\":%llu,\"cpu_self_us\":%llu,"
        "\"daemon_cpu_included\":%s,\"rss_kb\":%llu,\"offered_ops_per_s\":%s}\n",
        std::string(to_string(o.transport)).c_str(), o.workers, o.workload.shards,
        static_cast<unsigned long long>(o.workload.keys), o.workload.dim, o.workload.batch, o.iters,
        static_cast<unsigned long long>(pull.samples), static_cast<unsigned long long>(push.samples),
        static_cast<unsigned long long>(ops), pull.mean_us, pull.p50_us, pull.p99_us, pull.p999_us, pull.max_us,
        push.mean_us, push.p50_us, push.p99_us, push.p999_us, push.max_us, ops_per_s,
        static_cast<double>(keys) / wall_s, wall_s, cpu_per_op, static_cast<unsigned long long>(cpu_total),
        static_cast<unsigned long long>(worker_cpu), static_cast<unsigned long long>(cpu.servers_us),
        static_cast<unsigned long long>(cpu.daemon_us), static_cast<unsigned long long>(cpu.self_us),
        controls.empty() ? "null" : (cpu.daemon_included ? "true" : "false"), static_cast<unsigned long long>(rss_kb),
        o.rate > 0 ? std::to_string(o.rate).c_str() : "null");
  }
  return 0;
}

}  // namespace ferry::ps::tool
