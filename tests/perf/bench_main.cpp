// ferry-bench: the benchmark driver. Parses the contract CLI, runs the
// scenario once per size and prints a table or JSON lines.
#include <signal.h>

#include <cstdio>

#include "bench_options.h"
#include "report.h"
#include "scenarios.h"

using namespace ferry::bench;

namespace {

// Duration mode cannot know the op count up front: the sample array is
// sized for this many and the run ends early when it fills.
constexpr std::size_t kDurationSampleCap = std::size_t{1} << 22;

int exit_code_for(Outcome o) {
  switch (o) {
    case Outcome::Ok: return 0;
    case Outcome::Failed: return 1;
    case Outcome::NotAvailable: return 2;
    case Outcome::BadUsage: return 2;
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  const auto options = parse_options(argc, argv, &exit_code);
  if (!options) return exit_code;
  const BenchOptions& o = *options;
  // A peer that dies mid-write must surface as an error, not kill us.
  ::signal(SIGPIPE, SIG_IGN);

  if (o.scenario == "tcp-server") return run_tcp_server(o);
  if (o.scenario == "tcp-relay-server") return run_tcp_relay_server(o);
  const ScenarioSpec* spec = find_scenario(o.scenario);
  if (!spec) {
    std::fprintf(stderr, "ferry-bench: unknown scenario '%s'; known:\n", o.scenario.c_str());
    print_scenarios(stderr);
    return 2;
  }

  LatencyRecorder recorder(o.duration_s > 0 ? kDurationSampleCap : o.iters);
  bool header_printed = false;
  for (const std::size_t size : o.sizes) {
    ScenarioContext ctx(o, size, recorder);
    const Outcome outcome = spec->run(ctx);
    if (outcome != Outcome::Ok) {
      std::fprintf(stderr, "ferry-bench %s (size %zu): %s\n", o.scenario.c_str(), size, ctx.error().c_str());
      if (o.json) std::printf("%s\n", json_error_line(spec->name, size, to_string(outcome), ctx.error()).c_str());
      return exit_code_for(outcome);
    }
    SizeResult r;
    r.scenario = spec->name;
    r.size = size;
    r.concurrency = o.concurrency;
    r.ops = recorder.count();
    r.elapsed_s = ctx.elapsed_s();
    r.latency = summarize(recorder.samples());
    r.ops_per_s = r.elapsed_s > 0 ? static_cast<double>(r.ops) / r.elapsed_s : 0;
    r.bytes_per_s = r.ops_per_s * static_cast<double>(size) * spec->payload_per_op;
    r.cpu = ctx.cpu_report();
    r.cpu_us_per_op = r.ops > 0 ? static_cast<double>(r.cpu.total_us()) / static_cast<double>(r.ops) : 0;
    r.servers_charged = ctx.servers_charged();
    r.verified_ops = ctx.verified();
    if (o.json) {
      std::string line = json_line(r);
      line.insert(line.size() - 1, ctx.extra_json());  // before the closing brace
      std::printf("%s\n", line.c_str());
    } else {
      if (!header_printed) print_table_header();
      header_printed = true;
      print_table_row(r);
      if (!ctx.extra_json().empty()) std::printf("  %s\n", ctx.extra_json().c_str() + 1);
    }
    std::fflush(stdout);
  }
  return 0;
}
