// ferry-bench command line: the option set is a contract that scripts
// outside the project rely on, so it lives in one struct read in one place
// (boost.program_options, bench_options.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ferry::bench {

struct BenchOptions {
  std::string scenario;
  std::vector<std::size_t> sizes{64};  // --size B, or --sizes a,b,c (a sweep)
  bool sweep = false;                  // --sizes given
  std::uint64_t iters = 10000;         // measured operations per size
  double duration_s = 0;               // > 0: run for this long instead of iters
  std::uint64_t warmup = 0;            // unmeasured operations first (default: iters/10, max 1000)
  bool warmup_set = false;
  std::uint32_t concurrency = 1;       // calls kept outstanding (local-rpc); Sends per sender (incast)
  std::uint32_t senders = 16;          // incast: sender processes
  std::uint32_t stall_senders = 0;     // incast: senders to a second service whose process stops reading
  std::string socket;                  // daemon the measuring client attaches to (incast: a comma-separated list)
  std::string server_socket;           // daemon the forked server attaches to
  std::string target;                  // HOST:PORT (tcp-rpc, remote-rpc)
  std::string listen = "127.0.0.1:0";  // tcp-server
  bool json = false;
  bool busy_poll = false;             // ferry scenarios: spin on completions, never sleep
  std::uint32_t server_delay_us = 0;  // local-rpc, remote-rpc: the server answers each call this late

  // Defaults that depend on other options (socket paths, warmup).
  void finish();
  std::uint64_t warmup_ops() const;
};

// Parses argv. On error or --help returns nullopt after printing to stderr
// (help to stdout) and sets *exit_code (2 for usage errors, 0 for --help).
std::optional<BenchOptions> parse_options(int argc, char** argv, int* exit_code);

// "64,4096,1M" style lists; accepts K/M/G (binary) suffixes.
std::optional<std::size_t> parse_size(const std::string& text);
std::optional<std::vector<std::size_t>> parse_size_list(const std::string& text);

}  // namespace ferry::bench
