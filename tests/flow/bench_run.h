// Runs ferry-bench ($FERRY_BENCH, set by meson) as a child process with a
// deadline and reads its --json lines, for the flow-control tests. The
// bench does the checking of every message (checksums, exactly one
// completion, no loss); these tests add what a run must show on top.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"

namespace ferry::flowtest {

struct BenchRun {
  int exit_code = -1;              // 124 when killed at the deadline
  std::vector<json::Value> lines;  // every stdout line that parsed as a JSON object
  std::string stdout_text;
  std::string stderr_tail;
};

BenchRun run_bench(const std::vector<std::string>& args, std::chrono::seconds deadline);

// A number field of a --json line; nullopt when missing or not a number.
std::optional<double> number(const json::Value& line, const char* key);
std::uint64_t uint_field(const json::Value& line, const char* key);  // 0 when missing

// Flow-control keys that turn every send window off (0 = off).
std::vector<std::string> windows_off_args();

double median(std::vector<double> v);

}  // namespace ferry::flowtest
