#include "bench_options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "framed_io.h"
#include "scenario.h"

namespace ferry::bench {

namespace {

constexpr const char* kUsage =
    "usage: ferry-bench SCENARIO [--size BYTES | --sizes B1,B2,...] [--iters N | --duration SECONDS]\n"
    "                   [--warmup N] [--concurrency N] [--socket PATH] [--server-socket PATH]\n"
    "                   [--target HOST:PORT] [--listen HOST:PORT] [--busy-poll] [--json]\n"
    "                   [--senders N] [--stall-senders N]   (incast)\n"
    "\n"
    "  --size BYTES        message size (K/M/G suffixes: binary), default 64\n"
    "  --sizes LIST        a sweep: one table row (or one JSON line) per size, in order\n"
    "  --iters N           measured operations per size (default 10000)\n"
    "  --duration SECONDS  measure for this long instead (at most 4M operations)\n"
    "  --warmup N          unmeasured operations first (default iters/10, 10..1000)\n"
    "  --concurrency N     calls kept outstanding (local-rpc, remote-rpc; baselines need 1)\n"
    "  --socket PATH       daemon the measuring client attaches to (default $FERRY_SOCKET)\n"
    "  --server-socket P   daemon the forked server attaches to (default: --socket)\n"
    "  --target HOST:PORT  tcp-rpc: an existing `ferry-bench tcp-server`; remote-rpc: the server daemon\n"
    "  --listen HOST:PORT  tcp-server / forked tcp-rpc server address (default 127.0.0.1:0)\n"
    "  --busy-poll         ferry scenarios: client and server spin on completions (default: sleep)\n"
    "  --server-delay-us N local-rpc, remote-rpc: the server holds each call N us before it\n"
    "                      answers (sleeping), like a server that computes (default 0)\n"
    "  --senders N         incast: sender processes (default 16), round-robin over the --socket list\n"
    "  --stall-senders N   incast: N more senders to a second service whose process stops reading\n"
    "  --json              the last stdout line is one JSON object (a sweep: one line per size)\n"
    "\nbytes_per_s counts payload bytes carried: request + response for the RPC scenarios,\n"
    "the one message for ipc-echo. cpu_us_per_op = CPU of ferry-bench + its forked server +\n"
    "the daemon(s) (from the control socket) during the measured phase, over ops.\n"
    "\nscenarios:\n";

void usage_error(const std::string& msg, int* exit_code) {
  std::fprintf(stderr, "ferry-bench: %s\n%s", msg.c_str(), kUsage);
  print_scenarios(stderr);
  *exit_code = 2;
}

std::optional<std::uint64_t> parse_uint(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  return v;
}

}  // namespace

std::optional<std::size_t> parse_size(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::string digits = text;
  std::uint64_t scale = 1;
  switch (text.back()) {
    case 'k':
    case 'K':
      scale = 1ull << 10;
      digits.pop_back();
      break;
    case 'm':
    case 'M':
      scale = 1ull << 20;
      digits.pop_back();
      break;
    case 'g':
    case 'G':
      scale = 1ull << 30;
      digits.pop_back();
      break;
    default: break;
  }
  const auto v = parse_uint(digits);
  if (!v || *v == 0 || *v > kMaxFrameBytes / scale) return std::nullopt;
  return static_cast<std::size_t>(*v * scale);
}

std::optional<std::vector<std::size_t>> parse_size_list(const std::string& text) {
  std::vector<std::size_t> sizes;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const auto item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto size = parse_size(item);
    if (!size) return std::nullopt;
    sizes.push_back(*size);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (sizes.empty()) return std::nullopt;
  return sizes;
}

void BenchOptions::finish() {
  // Same rule as libferry's default_socket_path(), without linking it here.
  if (socket.empty()) {
    const char* env = std::getenv("FERRY_SOCKET");
    socket = (env && *env) ? env : "/run/ferry/ferryd.sock";
  }
  if (server_socket.empty()) server_socket = socket;
}

std::uint64_t BenchOptions::warmup_ops() const {
  if (warmup_set) return warmup;
  if (duration_s > 0) return 1000;
  return std::clamp<std::uint64_t>(iters / 10, 10, 1000);
}

std::optional<BenchOptions> parse_options(int argc, char** argv, int* exit_code) {
  BenchOptions o;
  bool iters_set = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_inline = false;
    if (arg.rfind("--", 0) == 0) {
      if (const auto eq = arg.find('='); eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg.resize(eq);
        has_inline = true;
      }
    }
    auto take = [&](std::string* out) {
      if (has_inline) {
        *out = value;
        return true;
      }
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "-h" || arg == "--help") {
      std::printf("%s", kUsage);
      print_scenarios(stdout);
      *exit_code = 0;
      return std::nullopt;
    } else if (arg == "--busy-poll") {
      o.busy_poll = true;
    } else if (arg == "--json") {
      o.json = true;
    } else if (arg == "--size") {
      const auto s = take(&v) ? parse_size(v) : std::nullopt;
      if (!s)
        return usage_error("--size needs a size in 1.." + std::to_string(kMaxFrameBytes), exit_code), std::nullopt;
      o.sizes = {*s};
    } else if (arg == "--sizes") {
      const auto s = take(&v) ? parse_size_list(v) : std::nullopt;
      if (!s) return usage_error("--sizes needs a comma-separated list of sizes", exit_code), std::nullopt;
      o.sizes = *s;
      o.sweep = true;
    } else if (arg == "--iters") {
      const auto n = take(&v) ? parse_uint(v) : std::nullopt;
      if (!n || *n == 0) return usage_error("--iters needs a positive integer", exit_code), std::nullopt;
      o.iters = *n;
      iters_set = true;
    } else if (arg == "--duration") {
      char* end = nullptr;
      const double d = take(&v) ? std::strtod(v.c_str(), &end) : 0;
      if (!(d > 0) || !end || *end) return usage_error("--duration needs positive seconds", exit_code), std::nullopt;
      o.duration_s = d;
    } else if (arg == "--warmup") {
      const auto n = take(&v) ? parse_uint(v) : std::nullopt;
      if (!n) return usage_error("--warmup needs a non-negative integer", exit_code), std::nullopt;
      o.warmup = *n;
      o.warmup_set = true;
    } else if (arg == "--concurrency") {
      const auto n = take(&v) ? parse_uint(v) : std::nullopt;
      if (!n || *n == 0 || *n > 4096) return usage_error("--concurrency needs 1..4096", exit_code), std::nullopt;
      o.concurrency = static_cast<std::uint32_t>(*n);
    } else if (arg == "--server-delay-us") {
      const auto n = take(&v) ? parse_uint(v) : std::nullopt;
      if (!n || *n > 10'000'000) return usage_error("--server-delay-us needs 0..10000000", exit_code), std::nullopt;
      o.server_delay_us = static_cast<std::uint32_t>(*n);
    } else if (arg == "--senders" || arg == "--stall-senders") {
      const auto n = take(&v) ? parse_uint(v) : std::nullopt;
      if (!n || *n > 256 || (arg == "--senders" && *n == 0))
        return usage_error(arg + " needs " + (arg == "--senders" ? "1" : "0") + "..256", exit_code), std::nullopt;
      (arg == "--senders" ? o.senders : o.stall_senders) = static_cast<std::uint32_t>(*n);
    } else if (arg == "--socket") {
      if (!take(&o.socket)) return usage_error("--socket needs a path", exit_code), std::nullopt;
    } else if (arg == "--server-socket") {
      if (!take(&o.server_socket)) return usage_error("--server-socket needs a path", exit_code), std::nullopt;
    } else if (arg == "--target") {
      if (!take(&o.target)) return usage_error("--target needs HOST:PORT", exit_code), std::nullopt;
    } else if (arg == "--listen") {
      if (!take(&o.listen)) return usage_error("--listen needs HOST:PORT", exit_code), std::nullopt;
    } else if (arg.rfind("-", 0) == 0) {
      return usage_error("unknown option " + arg, exit_code), std::nullopt;
    } else if (o.scenario.empty()) {
      o.scenario = arg;
    } else {
      return usage_error("unexpected argument " + arg, exit_code), std::nullopt;
    }
  }
  if (o.scenario.empty()) return usage_error("missing SCENARIO", exit_code), std::nullopt;
  if (iters_set && o.duration_s > 0)
    return usage_error("--iters and --duration exclude each other", exit_code), std::nullopt;
  o.finish();
  return o;
}

}  // namespace ferry::bench
