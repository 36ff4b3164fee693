// ferry-bench output: a human table row per size, or with --json one JSON
// object per line (the contract: the last stdout line is one JSON object
// with scenario, size, ops, mean_us, p50_us, p99_us, p999_us,
// cpu_us_per_op and bytes_per_s).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cpu_accounting.h"
#include "latency_stats.h"

namespace ferry::bench {

struct SizeResult {
  std::string_view scenario;
  std::size_t size = 0;
  std::uint32_t concurrency = 1;
  std::uint64_t ops = 0;
  double elapsed_s = 0;
  LatencySummary latency;
  double ops_per_s = 0;
  double bytes_per_s = 0;  // payload bytes carried (request + response for RPCs)
  CpuReport cpu;
  double cpu_us_per_op = 0;
  bool servers_charged = true;
  std::uint64_t verified_ops = 0;  // responses compared byte for byte
};

void print_table_header();
void print_table_row(const SizeResult& r);
std::string json_line(const SizeResult& r);
std::string json_error_line(std::string_view scenario, std::size_t size, std::string_view outcome,
                            const std::string& message);

}  // namespace ferry::bench
