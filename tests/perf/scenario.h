// What every ferry-bench scenario sees: the options, one message size, a
// preallocated latency recorder, the CPU meter and the measured-phase
// bracket. A scenario sets up, warms up, calls begin_measured(), records
// one sample per operation while more() says so, calls end_measured(),
// tears down. The driver (bench_main.cpp) summarises and prints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "bench_options.h"
#include "cpu_accounting.h"
#include "latency_stats.h"

namespace ferry::bench {

enum class Outcome : std::uint8_t { Ok, Failed, NotAvailable, BadUsage };
std::string_view to_string(Outcome o) noexcept;

class ScenarioContext {
 public:
  ScenarioContext(const BenchOptions& options, std::size_t size, LatencyRecorder& recorder)
      : options_(options), size_(size), recorder_(recorder) {}

  const BenchOptions& options() const { return options_; }
  std::size_t size() const { return size_; }
  CpuMeter& cpu() { return cpu_; }
  std::uint64_t warmup_ops() const { return options_.warmup_ops(); }

  void begin_measured();
  void end_measured();
  // Whether to issue another measured operation, given how many were
  // issued so far: --iters, --duration, or the sample array being full.
  bool more(std::uint64_t issued) const noexcept {
    if (options_.duration_s > 0) {
      // Reading the clock every op costs ~20 ns; every 16th is plenty.
      if ((issued & 15) == 0 && SteadyClock::now() >= deadline_) return false;
      return issued < recorder_.samples().capacity();
    }
    return issued < options_.iters;
  }
  void record(SteadyClock::duration d) noexcept { recorder_.record(d); }
  void count_verified() noexcept { ++verified_; }
  // Scenario-specific fields appended to the --json line (",\"key\":v"...).
  void add_json(const std::string& fields) { extra_json_ += fields; }
  const std::string& extra_json() const { return extra_json_; }
  // A server this run talks to but did not fork (tcp-rpc --target): its
  // CPU cannot be charged, and the report says so.
  void server_not_charged() noexcept { servers_charged_ = false; }

  // Filled by the scenario on failure.
  Outcome fail(Outcome o, std::string message) {
    error_ = std::move(message);
    return o;
  }

  // Results, read by the driver.
  const std::string& error() const { return error_; }
  double elapsed_s() const;
  const CpuReport& cpu_report() const { return cpu_report_; }
  std::uint64_t verified() const { return verified_; }
  bool servers_charged() const { return servers_charged_; }
  LatencyRecorder& recorder() { return recorder_; }

 private:
  const BenchOptions& options_;
  std::size_t size_;
  LatencyRecorder& recorder_;
  CpuMeter cpu_;
  CpuReport cpu_report_;
  SteadyClock::time_point start_{};
  SteadyClock::time_point stop_{};
  SteadyClock::time_point deadline_{SteadyClock::time_point::max()};
  std::uint64_t verified_ = 0;
  bool servers_charged_ = true;
  std::string error_;
  std::string extra_json_;
};

using ScenarioFn = Outcome (*)(ScenarioContext& ctx);

struct ScenarioSpec {
  std::string_view name;
  std::string_view summary;
  ScenarioFn run;
  // Payload bytes carried per operation, as a multiple of --size (an RPC
  // carries a request and a response: 2). bytes_per_s counts these.
  unsigned payload_per_op;
};

// The scenario table (scenario_table.cpp). nullptr when unknown.
const ScenarioSpec* find_scenario(std::string_view name);
void print_scenarios(std::FILE* out);

}  // namespace ferry::bench
