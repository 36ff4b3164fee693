// Config parsing and range checks, through the same entry point ferryd uses.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/config/config_file.h"
#include "daemon/config/config_keys.h"
#include "daemon/config/config_rules.h"
#include "daemon/front/descriptor_limit.h"
#include "daemon/loop/engine_fault.h"
#include "ferry_config.h"

using namespace ferry::daemon;

namespace {

ParseOutcome parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ferryd");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("defaults are valid and documented values") {
  auto o = parse({});
  REQUIRE(o.exit_code == -1);
  const Config& c = o.config;
  CHECK(c.runtime_dir == "/run/ferry");
  CHECK(c.tx_arena_bytes == 32 * kMiB);
  CHECK(c.rx_arena_bytes == 32 * kMiB);
  CHECK(c.max_tx_arena_bytes == kGiB);
  CHECK(c.sq_entries == 1024);
  CHECK(c.cq_entries == 4096);
  CHECK(c.max_clients == 256);
  CHECK(c.max_message_bytes == 1u << 20);
  CHECK(c.delivery_timeout_ms == 30000);
  CHECK(c.engine_spin_us == 50);
  CHECK(c.engine_spin_inflight_us == 1000);
  CHECK(c.transport == Transport::Auto);
  CHECK(check_ranges(c).ok());
}

TEST_CASE("flags are read") {
  auto o = parse({"--runtime-dir", "/tmp/x", "--listen", "198.18.0.1:7000", "--transport", "tcp", "--log-level",
                  "debug", "--tx-arena-bytes", "4m", "--sq-entries", "256", "--engine-spin-us", "0"});
  REQUIRE(o.exit_code == -1);
  CHECK(o.config.runtime_dir == "/tmp/x");
  CHECK(o.config.listen == "198.18.0.1:7000");
  CHECK(o.config.transport == Transport::Tcp);
  CHECK(o.config.log_level == LogLevel::Debug);
  CHECK(o.config.tx_arena_bytes == 4 * kMiB);
  CHECK(o.config.sq_entries == 256);
  CHECK(o.config.engine_spin_us == 0);
}

TEST_CASE("bad values exit 2") {
  const std::vector<std::vector<std::string>> bad = {
      {"--sq-entries", "100"},         // not a power of two
      {"--sq-entries", "32"},          // below min
      {"--cq-entries", "131072"},      // above max
      {"--tx-arena-bytes", "2g"},      // above max-tx-arena-bytes
      {"--max-rx-arena-bytes", "2g"},  // above 1 GiB
      {"--rx-arena-bytes", "1000"},    // below 1 MiB
      {"--max-clients", "0"},
      {"--max-message-bytes", "2m"},
      {"--delivery-timeout-ms", "0"},
      {"--engine-spin-us", "-1"},
      {"--max-clients", "12abc"},
      {"--transport", "udp"},
      {"--log-level", "loud"},
      {"--listen", "nohost"},
      {"--listen", "h:0"},
      {"--no-such-flag"},
      {"--socket", "/tmp/x.sock"},  // a prefix of --socket-group: not taken for it
      {"--sq", "256"},              // a prefix of --sq-entries
      {"--config", "/nonexistent/ferryd.ini"},
  };
  for (const auto& args : bad) {
    INFO(args[0] << " " << (args.size() > 1 ? args[1] : ""));
    CHECK(parse(args).exit_code == 2);
  }
}

TEST_CASE("range errors name the key and the range") {
  Config c;
  c.cq_entries = 100;
  auto err = check_ranges(c);
  REQUIRE(err.failed());
  CHECK(err.message().find("cq-entries") != std::string::npos);
  CHECK(err.message().find("power of two") != std::string::npos);
  CHECK(err.message().find("[64, 65536]") != std::string::npos);
  c = Config{};
  c.tx_arena_bytes = c.max_tx_arena_bytes + 1;
  err = check_ranges(c);
  REQUIRE(err.failed());
  CHECK(err.message().find("tx-arena-bytes") != std::string::npos);
}

TEST_CASE("config file: same keys, flags win") {
  char path[] = "/tmp/ferryd-config-test-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  {
    std::ofstream f(path);
    f << "runtime-dir = /tmp/from-file\nmax-clients = 9\nsq-entries = 128\n";
  }
  auto o = parse({"--config", path, "--max-clients", "17"});
  CHECK(o.exit_code == -1);
  CHECK(o.config.runtime_dir == "/tmp/from-file");
  CHECK(o.config.max_clients == 17);
  CHECK(o.config.sq_entries == 128);
  {
    std::ofstream f(path);
    f << "sq-entries = 99\n";
  }
  CHECK(parse({"--config", path}).exit_code == 2);
  std::remove(path);
}

TEST_CASE("help exits 0") { CHECK(parse({"--help"}).exit_code == 0); }

TEST_CASE("FERRY_FAULT_ENGINE: off unless set, forget-call-after=N armed, anything else refused") {
  // Both kinds of build run this: build/ compiles the switches in
  // (-Dfault_injection=true), build-asan/ keeps the project default (off).
  ::unsetenv("FERRY_FAULT_ENGINE");
  CHECK(parse({}).config.fault_forget_call_after == 0);
  ::setenv("FERRY_FAULT_ENGINE", "forget-call-after=100", 1);
  const auto armed = parse({});
  CHECK(armed.exit_code < 0);
  if constexpr (ferry::transport::kFaultInjection) {
    CHECK(armed.config.fault_forget_call_after == 100);
  } else {
    CHECK(armed.config.fault_forget_call_after == 0);  // ignored: not compiled in
  }
  for (const char* bad : {"forget-call-after=", "forget-call-after=0", "forget-call-after=1x", "forget-call",
                          "drop-after=3", "forget-call-after=-1", "forget-call-after=99999999999999"}) {
    INFO(bad);
    ::setenv("FERRY_FAULT_ENGINE", bad, 1);
    CHECK(parse({}).exit_code == (ferry::transport::kFaultInjection ? 2 : -1));
  }
  ::unsetenv("FERRY_FAULT_ENGINE");
}

TEST_CASE("EngineFault forgets exactly the Nth call, once, and only where compiled in") {
  auto f = parse_engine_fault("forget-call-after=3");
  REQUIRE(f);
  CHECK_FALSE(f->forget_this_call());
  CHECK_FALSE(f->forget_this_call());
  CHECK(f->forget_this_call() == ferry::transport::kFaultInjection);
  CHECK_FALSE(f->forget_this_call());
  CHECK_FALSE(f->armed());
  EngineFault off;
  CHECK_FALSE(off.forget_this_call());
}

TEST_CASE("the compiled fault-injection flag is the meson option") {
  CHECK(ferry::transport::kFaultInjection == (FERRY_FAULT_INJECTION != 0));
}

TEST_CASE("the option table: every row is consistent and every file key round-trips") {
  const Config defaults;
  for (const ConfigKey& k : config_keys()) {
    INFO(k.name);
    CHECK(find_key(k.name) == &k);
    CHECK_FALSE(k.summary.empty());
    if (k.kind == ValueKind::Flag) continue;
    REQUIRE(k.access.parse != nullptr);
    if (k.scope != Scope::Anywhere) continue;
    CHECK((k.access.text != nullptr) != (k.access.number != nullptr));
    if (k.kind == ValueKind::Number && k.max_key.empty()) CHECK(k.max >= k.min);
    if (!k.max_key.empty()) {
      const ConfigKey* bound = find_key(k.max_key);
      REQUIRE(bound != nullptr);
      CHECK(bound->kind == ValueKind::Number);
    }
    // The default, written out and read back, is the default.
    Config c;
    CHECK(k.access.parse(c, default_text(k)).ok());
    CHECK(value_text(k, c) == value_text(k, defaults));
  }
  CHECK(check_ranges(defaults).ok());
}

TEST_CASE("sizes: suffixes in, suffixes out") {
  CHECK(parse_u64("32m") == 32 * kMiB);
  CHECK(parse_u64("1G") == kGiB);
  CHECK(parse_u64("4k") == 4096u);
  CHECK_FALSE(parse_u64("m"));
  CHECK_FALSE(parse_u64("-1"));
  CHECK_FALSE(parse_u64("99999999999g"));
  CHECK(format_size(32 * kMiB) == "32m");
  CHECK(format_size(kGiB) == "1g");
  CHECK(format_size(8192) == "8192");
  CHECK(format_size(0) == "0");
}

TEST_CASE("cross-field rules refuse what would fail at run time") {
  Config c;
  c.heartbeat_ms = 60000;
  c.peer_timeout_ms = 20;
  auto err = check_ranges(c);
  REQUIRE(err.failed());
  CHECK(err.message().find("peer-timeout-ms") != std::string::npos);
  CHECK(err.message().find("heartbeat-ms") != std::string::npos);
  c = Config{};
  c.heartbeat_ms = 100;
  c.peer_timeout_ms = 300;
  CHECK(check_ranges(c).ok());
  c.max_memory_bytes_per_uid = 32 * kMiB;  // below one default client (32m + 32m)
  err = check_ranges(c);
  REQUIRE(err.failed());
  CHECK(err.message().find("max-memory-bytes-per-uid") != std::string::npos);
}

TEST_CASE("peer-max-connections: tcp lanes' credit floors fit in the receive pool; descriptors cover them") {
  Config c;
  CHECK(std::uint64_t{c.peer_max_connections} * c.credit_floor <= c.receive_pool);  // the defaults fit
  c.peer_max_connections = 1024;
  for (Transport t : {Transport::Tcp, Transport::Auto}) {
    c.transport = t;
    auto err = check_ranges(c);
    REQUIRE(err.failed());
    CHECK(err.message().find("peer-max-connections 1024") != std::string::npos);
    CHECK(err.message().find("receive-pool (1024)") != std::string::npos);
    CHECK(err.message().find("at least 4096") != std::string::npos);
  }
  c.transport = Transport::Rdma;  // the rdma transport's connections hold the floors
  CHECK(check_ranges(c).ok());
  c.transport = Transport::Tcp;
  c.receive_pool = 4096;
  CHECK(check_ranges(c).ok());
  c.peer_max_connections = 1025;
  REQUIRE(check_ranges(c).failed());
  CHECK(parse({"--peer-max-connections", "1025"}).exit_code == 2);
  CHECK(parse({"--peer-max-connections", "0"}).exit_code == 2);

  Config small, large;
  small.peer_max_connections = 64;
  large.peer_max_connections = 1024;
  CHECK(descriptors_needed(large) - descriptors_needed(small) == 1024 - 64);
}

TEST_CASE("a configuration no peer could open a channel to is a caution, not a refusal") {
  Config c;
  CHECK(config_cautions(c).empty());  // the defaults accept channels of any channel-conns up to 8
  c.channel_conns = 8;
  CHECK(config_cautions(c).empty());
  // tcp lanes: a channel brings its bootstrap and channel-conns lanes, none
  // vouched for until the first lane joins; 2 slots keep 1 for dials.
  c = Config{};
  c.transport = Transport::Tcp;
  c.peer_max_connections = 2;
  REQUIRE(config_cautions(c).size() == 1);
  CHECK(config_cautions(c)[0].find("peer-max-connections 2 keeps 1 slots") != std::string::npos);
  CHECK(config_cautions(c)[0].find("brings 2 at once") != std::string::npos);
  CHECK(check_ranges(c).ok());  // it still runs: it can dial (tests/multihost/test_no_room.cpp)
  c.peer_max_connections = 3;   // admits 2: the bootstrap and one lane
  CHECK(config_cautions(c).empty());
  c.channel_conns = 2;
  CHECK(config_cautions(c).size() == 1);
  c.peer_max_connections = 6;  // keeps 3, admits 3
  CHECK(config_cautions(c).empty());
  c.peer_max_unauthenticated_per_source = 2;
  REQUIRE(config_cautions(c).size() == 1);
  CHECK(config_cautions(c)[0].find(
            "peer-max-unauthenticated-per-source admits 2 connections not yet taken by a channel from one address") !=
        std::string::npos);
  // rdma lanes: the bootstrap is on tcp, the lanes are the rdma slots'.
  c = Config{};
  c.transport = Transport::Rdma;
  c.peer_max_connections = 2;
  CHECK(config_cautions(c).empty());
  c.channel_conns = 4;
  c.rdma_max_connections = 7;  // keeps 3, admits 4
  CHECK(config_cautions(c).empty());
  c.rdma_max_connections = 6;  // keeps 3, admits 3
  REQUIRE(config_cautions(c).size() == 1);
  CHECK(config_cautions(c)[0].find("rdma-max-connections 6") != std::string::npos);
  // auto may fall back to tcp: both apply.
  c.transport = Transport::Auto;
  c.rdma_max_connections = 64;
  c.peer_max_connections = 8;  // keeps 4, admits 4 of the 5 a tcp channel brings
  CHECK(config_cautions(c).size() == 1);
}

TEST_CASE("listen needs a numeric host, as start-up does") {
  CHECK(parse({"--listen", "localhost:7000"}).exit_code == 2);
  CHECK(parse({"--listen", "127.0.0.1:7000"}).exit_code == -1);
  CHECK(parse({"--listen", "[::1]:7000"}).exit_code == -1);
}

TEST_CASE("config file text: comments, command-line-only keys, duplicates") {
  std::vector<FileEntry> out;
  CHECK(parse_config_text("f", "# c\n\nmax-clients = 9  # trailing\nlisten =\ndevice = a#b\n", &out).ok());
  REQUIRE(out.size() == 3);
  CHECK(out[0].key == "max-clients");
  CHECK(out[0].value == "9");
  CHECK(out[0].line == 3);
  CHECK(out[1].value.empty());
  CHECK(out[2].value == "a#b");
  for (const char* bad :
       {"help = 1\n", "describe = 1\n", "max-clients = 1\nmax-clients = 2\n", "x = 1\n", "[s]\n", "just words\n"}) {
    INFO(bad);
    auto err = parse_config_text("f", bad, &out);
    REQUIRE(err.failed());
    CHECK(err.message().rfind("f:", 0) == 0);
  }
}
