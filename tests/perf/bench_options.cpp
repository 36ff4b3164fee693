#include "bench_options.h"

#include <algorithm>
#include <boost/program_options.hpp>
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
    "  --concurrency N     calls kept outstanding (local-rpc, remote-rpc), or messages (ipc-echo); baselines need 1\n"
    "  --socket PATH       daemon the measuring client attaches to (default $FERRY_SOCKET)\n"
    "  --server-socket P   daemon the forked server attaches to (default: --socket)\n"
    "  --target HOST:PORT  tcp-rpc: an existing `ferry-bench tcp-server` (tcp-relay-rpc: tcp-relay-server);\n"
    "                      remote-rpc: the server daemon\n"
    "  --listen HOST:PORT  tcp-server, tcp-relay-server / forked server address (default 127.0.0.1:0)\n"
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
  namespace po = boost::program_options;
  // Every value is read as text and checked here, so a usage error names
  // the option and what it takes (and the usage text follows it).
  po::options_description d;
  auto text = [] { return po::value<std::string>(); };
  d.add_options()("help,h", po::bool_switch())("busy-poll", po::bool_switch())("json", po::bool_switch())(
      "size", text())("sizes", text())("iters", text())("duration", text())("warmup", text())("concurrency", text())(
      "server-delay-us", text())("senders", text())("stall-senders", text())("socket", text())("server-socket", text())(
      "target", text())("listen", text())("scenario", po::value<std::vector<std::string>>());
  po::positional_options_description positional;
  positional.add("scenario", -1);
  po::variables_map vm;
  try {
    constexpr int kStyle = po::command_line_style::unix_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(argc, argv).options(d).positional(positional).style(kStyle).run(), vm);
  } catch (const po::error& e) {
    return usage_error(e.what(), exit_code), std::nullopt;
  }
  if (vm["help"].as<bool>()) {
    std::printf("%s", kUsage);
    print_scenarios(stdout);
    *exit_code = 0;
    return std::nullopt;
  }
  BenchOptions o;
  o.busy_poll = vm["busy-poll"].as<bool>();
  o.json = vm["json"].as<bool>();
  auto has = [&](const char* key) { return vm.count(key) != 0; };
  auto str = [&](const char* key) { return vm[key].as<std::string>(); };
  auto fail = [&](const std::string& msg) {
    usage_error(msg, exit_code);
    return std::optional<BenchOptions>{};
  };
  if (has("scenario")) {
    const auto& words = vm["scenario"].as<std::vector<std::string>>();
    if (words.size() > 1) return fail("unexpected argument " + words[1]);
    o.scenario = words[0];
  }
  if (has("size")) {
    const auto s = parse_size(str("size"));
    if (!s) return fail("--size needs a size in 1.." + std::to_string(kMaxFrameBytes));
    o.sizes = {*s};
  }
  if (has("sizes")) {
    const auto s = parse_size_list(str("sizes"));
    if (!s) return fail("--sizes needs a comma-separated list of sizes");
    o.sizes = *s;
    o.sweep = true;
  }
  if (has("iters")) {
    const auto n = parse_uint(str("iters"));
    if (!n || *n == 0) return fail("--iters needs a positive integer");
    o.iters = *n;
  }
  if (has("duration")) {
    const std::string v = str("duration");
    char* end = nullptr;
    const double dur = std::strtod(v.c_str(), &end);
    if (!(dur > 0) || end == nullptr || *end != '\0') return fail("--duration needs positive seconds");
    o.duration_s = dur;
  }
  if (has("warmup")) {
    const auto n = parse_uint(str("warmup"));
    if (!n) return fail("--warmup needs a non-negative integer");
    o.warmup = *n;
    o.warmup_set = true;
  }
  if (has("concurrency")) {
    const auto n = parse_uint(str("concurrency"));
    if (!n || *n == 0 || *n > 4096) return fail("--concurrency needs 1..4096");
    o.concurrency = static_cast<std::uint32_t>(*n);
  }
  if (has("server-delay-us")) {
    const auto n = parse_uint(str("server-delay-us"));
    if (!n || *n > 10'000'000) return fail("--server-delay-us needs 0..10000000");
    o.server_delay_us = static_cast<std::uint32_t>(*n);
  }
  if (has("senders")) {
    const auto n = parse_uint(str("senders"));
    if (!n || *n == 0 || *n > 256) return fail("--senders needs 1..256");
    o.senders = static_cast<std::uint32_t>(*n);
  }
  if (has("stall-senders")) {
    const auto n = parse_uint(str("stall-senders"));
    if (!n || *n > 256) return fail("--stall-senders needs 0..256");
    o.stall_senders = static_cast<std::uint32_t>(*n);
  }
  if (has("socket")) o.socket = str("socket");
  if (has("server-socket")) o.server_socket = str("server-socket");
  if (has("target")) o.target = str("target");
  if (has("listen")) o.listen = str("listen");
  if (o.scenario.empty()) return fail("missing SCENARIO");
  if (has("iters") && o.duration_s > 0) return fail("--iters and --duration exclude each other");
  o.finish();
  return o;
}

}  // namespace ferry::bench
