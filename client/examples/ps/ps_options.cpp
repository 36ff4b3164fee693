#include "ps_options.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ferry/client.h"
#include "ps_protocol.h"

namespace ferry::ps {

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
                  [--shard-pool N]
  ferry-ps check  (same options; deterministic run, then every parameter is compared
                  with a sequential in-process reference; exit 0 only when all match)
  ferry-ps server --shard i/n --keys K --dim D [--transport ferry|tcp] [--socket PATH]
                  [--listen HOST:PORT] [--batch B] [--dense F] [--lr LR] [--shard-pool N]
  ferry-ps worker --worker-id W --shards M --keys K --dim D --iters I [--transport ferry|tcp]
                  [--socket PATH] [--target HOST:PORT] [--shard-addrs A,B,...]

Defaults: --workers 2 --shards 2 --keys 100000 --dim 64 --iters 1000 --batch 512
--skew 0.99 --lr 0.125 --dense 0 --warmup 20 --seed 1. Shards serve "ps-shard-<i>"
(ferry) and own the keys with key % n == i. --target: for ferry, the --listen address
of the shards' daemon (workers open HOST:PORT/ps-shard-<i>); for tcp, the host the
shards listen on (default 127.0.0.1, ports chosen by the OS).
--json: last stdout line is one JSON object (pull/push mean/p50/p99/p999 us, ops_per_s,
cpu_us_per_op over workers + shards + daemons, rss_kb). --latency-dump FILE writes
"pull|push <microseconds>" lines. --shard-pool N: response buffers of each ferry shard,
replies in flight at once; requests beyond wait in the shard (default 2 x workers + 4,
server 64). --fault-skip-push IT (tests): worker 0 drops that push.
)";

bool parse_u64(const char* s, std::uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-') return false;
  *out = v;
  return true;
}

bool parse_u32(const char* s, std::uint32_t* out, std::uint32_t min, std::uint32_t max) {
  std::uint64_t v = 0;
  if (!parse_u64(s, &v) || v < min || v > max) return false;
  *out = static_cast<std::uint32_t>(v);
  return true;
}

bool parse_double(const char* s, double* out) {
  char* end = nullptr;
  *out = std::strtod(s, &end);
  return end != s && *end == '\0';
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
  Workload& w = o->workload;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--json") {
      o->json = true;
      continue;
    }
    if (a == "--busy-poll") {
      o->busy_poll = true;
      continue;
    }
    if (i + 1 >= argc) return usage_error("missing value for " + a);
    const char* v = argv[++i];
    bool ok = true;
    std::uint64_t u64 = 0;
    if (a == "--transport") {
      if (std::strcmp(v, "ferry") == 0)
        o->transport = TransportKind::Ferry;
      else if (std::strcmp(v, "tcp") == 0)
        o->transport = TransportKind::Tcp;
      else
        ok = false;
    } else if (a == "--workers")
      ok = parse_u32(v, &o->workers, 1, 256);
    else if (a == "--shards")
      ok = parse_u32(v, &w.shards, 1, 256);
    else if (a == "--keys")
      ok = parse_u64(v, &w.keys) && w.keys >= 1 && w.keys <= (1ull << 32);
    else if (a == "--dim")
      ok = parse_u32(v, &w.dim, 1, kMaxDim);
    else if (a == "--iters")
      ok = parse_u32(v, &o->iters, 1, 1u << 30);
    else if (a == "--warmup")
      ok = parse_u32(v, &o->warmup, 0, 1u << 20);
    else if (a == "--batch")
      ok = parse_u32(v, &w.batch, 1, kMaxKeysPerMessage);
    else if (a == "--dense")
      ok = parse_u32(v, &w.dense, 0, kMaxDense);
    else if (a == "--skew")
      ok = parse_double(v, &w.skew) && w.skew >= 0 && w.skew <= 10;
    else if (a == "--lr")
      ok = parse_double(v, &o->lr) && o->lr > 0;
    else if (a == "--seed")
      ok = parse_u64(v, &w.seed);
    else if (a == "--socket")
      o->socket = v;
    else if (a == "--server-socket")
      o->server_socket = v;
    else if (a == "--target")
      o->target = v;
    else if (a == "--listen")
      o->listen = v;
    else if (a == "--latency-dump")
      o->latency_dump = v;
    else if (a == "--worker-netns")
      o->worker_netns = v;
    else if (a == "--shard-netns")
      o->shard_netns = v;
    else if (a == "--shard-pool")
      ok = parse_u32(v, &o->shard_pool, 1, 4096);
    else if (a == "--fault-skip-push")
      ok = parse_u32(v, &o->fault_skip_push, 0, UINT32_MAX - 1);
    else if (a == "--worker-id")
      ok = parse_u32(v, &o->worker_id, 0, 1u << 20);
    else if (a == "--shard") {
      const char* slash = std::strchr(v, '/');
      std::uint64_t n = 0;
      ok = slash && parse_u64(std::string(v, slash).c_str(), &u64) && parse_u64(slash + 1, &n) && n >= 1 && n <= 256 &&
           u64 < n;
      if (ok) {
        o->shard_index = static_cast<std::uint32_t>(u64);
        w.shards = static_cast<std::uint32_t>(n);
      }
    } else if (a == "--shard-addrs") {
      std::string list = v;
      for (std::size_t start = 0; start <= list.size();) {
        const auto comma = list.find(',', start);
        const auto end = comma == std::string::npos ? list.size() : comma;
        if (end > start) o->shard_addresses.push_back(list.substr(start, end - start));
        start = end + 1;
      }
    } else {
      return usage_error("unknown option " + a);
    }
    if (!ok) return usage_error("bad value '" + std::string(v) + "' for " + a);
  }
  if (o->socket.empty()) o->socket = default_socket_path();
  if (o->server_socket.empty()) o->server_socket = o->socket;
  if (o->command == Command::Check) o->warmup = 0;
  return -1;
}

}  // namespace ferry::ps
