#include "ps_options.h"

#include <boost/program_options.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "ferry/client.h"
#include "ferry/ps/wire.h"

namespace ferry::ps::tool {

namespace po = boost::program_options;

std::string_view to_string(Command c) noexcept {
  switch (c) {
    case Command::Server: return "server";
    case Command::Worker: return "worker";
    case Command::Bench: return "bench";
    case Command::Check: return "check";
  }
  return "unknown";
}

namespace {

constexpr const char* kUsage = R"(usage:
  ferry-ps bench  --transport ferry|tcp --workers N --shards M --keys K --dim D --iters I
                  [--socket PATH] [--server-socket PATH] [--target HOST:PORT] [--json]
                  [--latency-dump FILE] [--batch B] [--skew S] [--lr LR] [--dense F]
                  [--warmup I] [--seed N] [--busy-poll] [--worker-netns NS] [--shard-netns NS]
                  [--shard-pool N] [--rate OPS]
  ferry-ps check  (same options; deterministic run, then every parameter is compared
                  with a sequential in-process reference; exit 0 only when all match)
  ferry-ps server --shard i/n --keys K --dim D [--transport ferry|tcp] [--socket PATH]
                  [--listen HOST:PORT] [--batch B] [--dense F] [--lr LR] [--shard-pool N]
                  [--reattach-s S]
  ferry-ps worker --worker-id W --shards M --keys K --dim D --iters I [--transport ferry|tcp]
                  [--socket PATH] [--target HOST:PORT] [--shard-addrs A,B,...]

--rate OPS: open loop. Each worker starts its iterations (a pull, then a push: two
ops) at Poisson arrivals, OPS/2 per second over all workers, and each op's latency
counts from its intended start, so a stall shows as latency instead of a slower
offered load. Without it each worker starts the next iteration when the last ends.

Defaults: --workers 2 --shards 2 --keys 100000 --dim 64 --iters 1000 --batch 512
--skew 0.99 --lr 0.125 --dense 0 --warmup 20 --seed 1. Shards serve "ps-shard-<i>"
(ferry) and own the keys the placement hash gives them (ferry/ps/table.h). --target:
for ferry, the --listen address of the shards' daemon (workers open
HOST:PORT/ps-shard-<i>); for tcp, the host the shards listen on (default 127.0.0.1,
ports chosen by the OS). A batch's duplicate keys are pulled once and their gradients
summed before the push.
--json: last stdout line is one JSON object (pull/push mean/p50/p99/p999 us, ops_per_s,
cpu_us_per_op over workers + shards + daemons, rss_kb). --latency-dump FILE writes
"pull|push <microseconds>" lines. --shard-pool N: response buffers of each ferry shard,
replies in flight at once; requests beyond wait in the shard (default 2 x workers + 4,
server 64). --reattach-s S (server, ferry): when its ferryd goes away, keep the rows and
attach again for S seconds, then serve them on the new ferryd (default 60; 0: exit at
once). --fault-skip-push IT (tests): worker 0 drops that push.
)";

// Unsigned decimal in [min, max]; program_options' own conversion accepts "-1".
std::uint64_t to_u64(const std::string& name, const std::string& v, std::uint64_t min, std::uint64_t max) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || v[0] == '-' || errno != 0 || *end != '\0' || x < min || x > max)
    throw std::invalid_argument("bad value '" + v + "' for --" + name);
  return x;
}

double to_double(const std::string& name, const std::string& v, double min, double max) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x >= min && x <= max))
    throw std::invalid_argument("bad value '" + v + "' for --" + name);
  return x;
}

std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  for (std::size_t start = 0; start <= list.size();) {
    const auto comma = list.find(',', start);
    const auto end = comma == std::string::npos ? list.size() : comma;
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

po::options_description describe() {
  po::options_description d("ferry-ps options");
  auto text = [] { return po::value<std::string>(); };
  d.add_options()("help,h", "this text")("json", "JSON summary as the last line")(
      "busy-poll", "spin on the completion ring instead of sleeping")("transport", text(), "ferry|tcp")(
      "workers", text(), "worker processes")("shards", text(), "shard processes")("keys", text(), "embedding rows")(
      "dim", text(), "floats per row")("iters", text(), "measured iterations per worker")(
      "warmup", text(), "unmeasured iterations first")("batch", text(), "keys drawn per iteration")(
      "dense", text(), "dense floats per shard")("skew", text(), "Zipf exponent")("lr", text(), "SGD learning rate")(
      "seed", text(), "key stream seed")("socket", text(), "workers' ferryd")(
      "server-socket", text(), "shards' ferryd")("target", text(), "shards' HOST:PORT (ferry) or host (tcp)")(
      "listen", text(), "server --transport tcp: HOST:PORT")("latency-dump", text(), "FILE")(
      "worker-netns", text(), "NS")("shard-netns", text(), "NS")("shard-pool", text(), "response buffers per shard")(
      "reattach-s", text(), "server: seconds to attach again after ferryd went away")(
      "fault-skip-push", text(), "tests: worker 0 drops this push")("worker-id", text(), "worker: its number")(
      "shard", text(), "server: i/n")("rate", text(), "bench: offered ops/s over all workers (open loop)")(
      "shard-addrs", text(), "worker --transport tcp: A,B,...");
  return d;
}

void apply_options(const po::variables_map& vm, PsOptions* o) {
  Workload& w = o->workload;
  auto has = [&](const char* k) { return vm.count(k) != 0; };
  auto str = [&](const char* k) { return vm[k].as<std::string>(); };
  auto u32 = [&](const char* k, std::uint32_t min, std::uint32_t max) {
    return static_cast<std::uint32_t>(to_u64(k, str(k), min, max));
  };
  o->json = has("json");
  o->busy_poll = has("busy-poll");
  if (has("transport")) {
    const std::string t = str("transport");
    if (t == "ferry")
      o->transport = TransportKind::Ferry;
    else if (t == "tcp")
      o->transport = TransportKind::Tcp;
    else
      throw std::invalid_argument("bad value '" + t + "' for --transport");
  }
  if (has("workers")) o->workers = u32("workers", 1, 256);
  if (has("shards")) w.shards = u32("shards", 1, kMaxShards);
  if (has("keys")) w.keys = to_u64("keys", str("keys"), 1, 1ull << 32);
  if (has("dim")) w.dim = u32("dim", 1, kMaxDim);
  if (has("iters")) o->iters = u32("iters", 1, 1u << 30);
  if (has("warmup")) o->warmup = u32("warmup", 0, 1u << 20);
  if (has("batch")) w.batch = u32("batch", 1, 1u << 16);
  if (has("dense")) w.dense = u32("dense", 0, 1u << 20);
  if (has("skew")) w.skew = to_double("skew", str("skew"), 0, 10);
  if (has("lr")) o->lr = to_double("lr", str("lr"), 1e-30, 1e30);
  if (has("seed")) w.seed = to_u64("seed", str("seed"), 0, UINT64_MAX);
  if (has("socket")) o->socket = str("socket");
  if (has("server-socket")) o->server_socket = str("server-socket");
  if (has("target")) o->target = str("target");
  if (has("listen")) o->listen = str("listen");
  if (has("latency-dump")) o->latency_dump = str("latency-dump");
  if (has("worker-netns")) o->worker_netns = str("worker-netns");
  if (has("shard-netns")) o->shard_netns = str("shard-netns");
  if (has("shard-pool")) o->shard_pool = u32("shard-pool", 1, 4096);
  if (has("reattach-s")) o->reattach_s = u32("reattach-s", 0, 86400);
  if (has("fault-skip-push")) o->fault_skip_push = u32("fault-skip-push", 0, UINT32_MAX - 1);
  if (has("worker-id")) o->worker_id = u32("worker-id", 0, 1u << 20);
  if (has("shard")) {
    const std::string v = str("shard");
    const auto slash = v.find('/');
    if (slash == std::string::npos) throw std::invalid_argument("bad value '" + v + "' for --shard (want i/n)");
    const std::uint64_t n = to_u64("shard", v.substr(slash + 1), 1, kMaxShards);
    o->shard_index = static_cast<std::uint32_t>(to_u64("shard", v.substr(0, slash), 0, n - 1));
    w.shards = static_cast<std::uint32_t>(n);
  }
  if (has("shard-addrs")) o->shard_addresses = split_commas(str("shard-addrs"));
  if (has("rate")) o->rate = to_double("rate", str("rate"), 1, 1e9);
}

int usage_error(const std::string& what) {
  std::fprintf(stderr, "ferry-ps: %s\n%s", what.c_str(), kUsage);
  return 2;
}

}  // namespace

int parse_options(int argc, char** argv, PsOptions* o) {
  if (argc < 2) return usage_error("missing command");
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "server")
    o->command = Command::Server;
  else if (cmd == "worker")
    o->command = Command::Worker;
  else if (cmd == "bench")
    o->command = Command::Bench;
  else if (cmd == "check")
    o->command = Command::Check;
  else
    return usage_error("unknown command '" + cmd + "'");
  try {
    po::variables_map vm;
    // No prefix guessing: an abbreviation must not silently become another option.
    constexpr int kStyle = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    const po::positional_options_description none;  // a stray word is an error, not ignored
    po::store(po::command_line_parser(argc - 1, argv + 1).options(describe()).positional(none).style(kStyle).run(), vm);
    if (vm.count("help")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    apply_options(vm, o);
  } catch (const std::exception& e) {
    return usage_error(e.what());
  }
  if (o->socket.empty()) o->socket = default_socket_path();
  if (o->server_socket.empty()) o->server_socket = o->socket;
  if (o->command == Command::Check) o->warmup = 0;
  return -1;
}

}  // namespace ferry::ps::tool
