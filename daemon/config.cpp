// Command line and INI parsing (boost.program_options). Numbers are read as
// strings and parsed here, so "-1" or "12abc" is an error naming the key
// rather than a silently wrapped unsigned value.
#include "daemon/config.h"

#include "daemon/engine_fault.h"
#include "daemon/peer/auth_secret.h"
#include "daemon/target.h"
#include "transport/wire/handshake.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace po = boost::program_options;

namespace ferry::daemon {

std::string_view to_string(Transport t) noexcept {
  switch (t) {
    case Transport::Auto: return "auto";
    case Transport::Rdma: return "rdma";
    case Transport::Tcp: return "tcp";
  }
  return "unknown";
}

std::string_view to_string(LogLevel l) noexcept {
  switch (l) {
    case LogLevel::Trace: return "trace";
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warn: return "warn";
    case LogLevel::Error: return "error";
  }
  return "unknown";
}

namespace {

std::string describe(const Range& r) {
  std::ostringstream os;
  os << r.key << " must be " << (r.power_of_two ? "a power of two " : "") << "in [" << r.min << ", " << r.max << "]";
  return os.str();
}

std::optional<std::string> check(const Range& r, std::uint64_t v) {
  bool pow2 = v != 0 && (v & (v - 1)) == 0;
  if (v < r.min || v > r.max || (r.power_of_two && !pow2)) {
    return "invalid value " + std::to_string(v) + ": " + describe(r);
  }
  return std::nullopt;
}

// Plain decimal, optionally with a binary suffix k/m/g (case-insensitive).
std::optional<std::uint64_t> parse_u64(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::uint64_t mult = 1;
  char last = s.back();
  if (last == 'k' || last == 'K') mult = 1ull << 10;
  if (last == 'm' || last == 'M') mult = 1ull << 20;
  if (last == 'g' || last == 'G') mult = 1ull << 30;
  if (mult != 1) s.remove_suffix(1);
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  if (v > UINT64_MAX / mult) return std::nullopt;
  return v * mult;
}

struct NumericKey {
  std::string_view key;
  const char* help;
};

constexpr NumericKey kNumericKeys[] = {
    {"tx-arena-bytes", "default tx arena per client (bytes; k/m/g suffix ok) [32m; 1m..max-tx-arena-bytes]"},
    {"max-tx-arena-bytes", "largest tx arena a client may ask for [1g; 1m..1g]"},
    {"rx-arena-bytes", "default rx arena per client [32m; 1m..max-rx-arena-bytes]"},
    {"max-rx-arena-bytes", "largest rx arena a client may ask for [1g; 1m..1g]"},
    {"sq-entries", "default submission ring entries [1024; power of two 64..65536]"},
    {"cq-entries", "default completion ring entries [4096; power of two 64..65536]"},
    {"max-clients", "most attached clients [256; 1..4096]"},
    {"max-message-bytes", "largest message/request/response [1m; 64..1m]"},
    {"delivery-timeout-ms", "how long a back-pressured delivery may wait [30000; 1..3600000]"},
    {"call-timeout-ms",
     "how long a call may wait at the server's daemon for its reply before it completes Timeout, unless the call "
     "sets its own; 0 = no limit "
     "[60000; 0..3600000]"},
    {"engine-spin-us", "engine busy-poll time before sleeping [50; 0..100000]"},
    {"engine-spin-inflight-us",
     "engine busy-poll time before sleeping while calls or remote operations it handled are in flight "
     "(their answers are due); skipped while most answers come later than it [1000; 0..100000]"},
    {"heartbeat-ms", "heartbeat interval to peer daemons [500; 10..60000]"},
    {"peer-timeout-ms", "silence after which a peer daemon is dead [3000; 20..600000]"},
    {"connect-timeout-ms", "bound on connecting + handshaking with a peer [2000; 1..60000]"},
    {"channel-conns", "data connections per channel [1; 1..8]"},
    {"staging-bytes", "daemon buffer for remote deliveries to a full receiver; past it Busy [8m; 0..1g]"},
    {"eager-threshold", "rdma: largest message sent eagerly (SEND into a posted receive) [8192; 4096..1m]"},
    {"rdma-ack-timeout", "rdma: QP local ACK timeout exponent, 4.096us*2^n [14; 1..31]"},
    {"endpoint-window-ops", "remote ops in flight per endpoint; 0 = no limit [32; 0..65536]"},
    {"channel-window-ops", "remote ops in flight per peer channel; 0 = no limit [512; 0..65536]"},
    {"channel-window-bytes", "request bytes in flight per peer channel; 0 = no limit [32m; 0..4g]"},
    {"nic-window-bytes", "request bytes in flight over all channels; 0 = no limit [128m; 0..4g]"},
    {"max-reads-inflight", "rdma: rendezvous READs in flight per channel (receiver) [8; 1..256]"},
    {"rdma-windows",
     "rdma: memory windows giving peers a key per exposed buffer per call; 0 = a key to the client's whole tx "
     "arena [1024; 0..65536]"},
};

std::uint64_t* field(Config& c, std::string_view key, std::uint32_t** narrow) {
  *narrow = nullptr;
  if (key == "tx-arena-bytes") return &c.tx_arena_bytes;
  if (key == "max-tx-arena-bytes") return &c.max_tx_arena_bytes;
  if (key == "rx-arena-bytes") return &c.rx_arena_bytes;
  if (key == "max-rx-arena-bytes") return &c.max_rx_arena_bytes;
  if (key == "sq-entries") *narrow = &c.sq_entries;
  if (key == "cq-entries") *narrow = &c.cq_entries;
  if (key == "max-clients") *narrow = &c.max_clients;
  if (key == "max-message-bytes") *narrow = &c.max_message_bytes;
  if (key == "delivery-timeout-ms") *narrow = &c.delivery_timeout_ms;
  if (key == "call-timeout-ms") *narrow = &c.call_timeout_ms;
  if (key == "engine-spin-us") *narrow = &c.engine_spin_us;
  if (key == "engine-spin-inflight-us") *narrow = &c.engine_spin_inflight_us;
  if (key == "heartbeat-ms") *narrow = &c.heartbeat_ms;
  if (key == "peer-timeout-ms") *narrow = &c.peer_timeout_ms;
  if (key == "connect-timeout-ms") *narrow = &c.connect_timeout_ms;
  if (key == "channel-conns") *narrow = &c.channel_conns;
  if (key == "staging-bytes") return &c.staging_bytes;
  if (key == "eager-threshold") *narrow = &c.eager_threshold;
  if (key == "rdma-ack-timeout") *narrow = &c.rdma_ack_timeout;
  if (key == "endpoint-window-ops") *narrow = &c.endpoint_window_ops;
  if (key == "channel-window-ops") *narrow = &c.channel_window_ops;
  if (key == "channel-window-bytes") return &c.channel_window_bytes;
  if (key == "nic-window-bytes") return &c.nic_window_bytes;
  if (key == "max-reads-inflight") *narrow = &c.max_reads_inflight;
  if (key == "rdma-windows") *narrow = &c.rdma_windows;
  return nullptr;
}

}  // namespace

std::optional<std::string> check_ranges(const Config& c) {
  const std::uint64_t kSlab = shm::kSlabBytes;
  const std::uint64_t wire_min_message = wire::kMinMessageBytes;  // the handshake floor
  const std::pair<Range, std::uint64_t> checks[] = {
      {{"max-tx-arena-bytes", shm::kMinArenaBytes, kGiB}, c.max_tx_arena_bytes},
      {{"max-rx-arena-bytes", shm::kMinArenaBytes, kGiB}, c.max_rx_arena_bytes},
      {{"tx-arena-bytes", shm::kMinArenaBytes, c.max_tx_arena_bytes}, c.tx_arena_bytes},
      {{"rx-arena-bytes", shm::kMinArenaBytes, c.max_rx_arena_bytes}, c.rx_arena_bytes},
      {{"sq-entries", shm::kMinRingEntries, shm::kMaxRingEntries, true}, c.sq_entries},
      {{"cq-entries", shm::kMinRingEntries, shm::kMaxRingEntries, true}, c.cq_entries},
      {{"max-clients", 1, 4096}, c.max_clients},
      {{"max-message-bytes", 64, kSlab}, c.max_message_bytes},
      {{"delivery-timeout-ms", 1, 3600000}, c.delivery_timeout_ms},
      {{"call-timeout-ms", 0, shm::kMaxCallTimeoutMs}, c.call_timeout_ms},
      {{"engine-spin-us", 0, 100000}, c.engine_spin_us},
      {{"engine-spin-inflight-us", 0, 100000}, c.engine_spin_inflight_us},
      {{"heartbeat-ms", 10, 60000}, c.heartbeat_ms},
      {{"peer-timeout-ms", 20, 600000}, c.peer_timeout_ms},
      {{"connect-timeout-ms", 1, 60000}, c.connect_timeout_ms},
      {{"channel-conns", 1, 8}, c.channel_conns},
      {{"staging-bytes", 0, kGiB}, c.staging_bytes},
      {{"eager-threshold", wire_min_message, kSlab}, c.eager_threshold},
      {{"rdma-ack-timeout", 1, 31}, c.rdma_ack_timeout},
      {{"endpoint-window-ops", 0, 65536}, c.endpoint_window_ops},
      {{"channel-window-ops", 0, 65536}, c.channel_window_ops},
      {{"channel-window-bytes", 0, 4 * kGiB}, c.channel_window_bytes},
      {{"nic-window-bytes", 0, 4 * kGiB}, c.nic_window_bytes},
      {{"max-reads-inflight", 1, 256}, c.max_reads_inflight},
      {{"rdma-windows", 0, 65536}, c.rdma_windows},
  };
  for (const auto& [range, value] : checks) {
    if (auto err = check(range, value)) return err;
  }
  return std::nullopt;
}

ParseOutcome parse_command_line(int argc, const char* const* argv) { return parse_command_line(argc, argv, std::cerr); }

ParseOutcome parse_command_line(int argc, const char* const* argv, std::ostream& err) {
  ParseOutcome out;
  Config& c = out.config;
  po::options_description general("ferryd options");
  general.add_options()("help,h", "print this help and exit")(
      "runtime-dir", po::value<std::string>(), "directory for ferryd.sock and control.sock [/run/ferry]")(
      "listen", po::value<std::string>(), "bootstrap address HOST:PORT where peer daemons connect (numeric host)")(
      "transport", po::value<std::string>(), "rdma|tcp|auto [auto: rdma when an RDMA device exists, else tcp]")(
      "device", po::value<std::string>(), "RDMA device name [first found]")(
      "config", po::value<std::string>(),
      "INI file with the same keys as these flags (flags win) [/etc/ferry/ferryd.conf when it exists]")(
      "check-config", "validate the configuration, print the effective settings and exit (0 ok, 2 bad)")(
      "log-level", po::value<std::string>(), "trace|debug|info|warn|error [info]; SIGHUP applies a change")(
      "socket-group", po::value<std::string>(), "group owning ferryd.sock and control.sock (mode 0660) [ferryd's]")(
      "auth-secret-file", po::value<std::string>(),
      "peer shared-secret file: peer daemons must prove they know the same secret (mode 0600/0400, at least "
      "16 bytes, trailing newline trimmed; read at start-up) [none: no authentication]")(
      "gid-index", po::value<std::string>(), "RDMA source GID index override [auto; auto or 0..255]");
  for (const auto& k : kNumericKeys) {
    general.add_options()(std::string(k.key).c_str(), po::value<std::string>(), k.help);
  }

  po::variables_map vm;
  try {
    // No guessing: boost would take an unambiguous prefix for the whole name
    // (`--socket` for `--socket-group`), so a mistyped flag would set another.
    constexpr int kStyle = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(argc, argv).options(general).style(kStyle).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: ferryd [options]\n" << general << "\n";
      out.exit_code = 0;
      return out;
    }
    out.check_config = vm.count("check-config") != 0;
    if (vm.count("config")) {
      c.config_file = vm["config"].as<std::string>();
    } else if (struct stat st{}; ::stat(std::string(kDefaultConfigFile).c_str(), &st) == 0) {
      c.config_file = std::string(kDefaultConfigFile);
    }
    if (!c.config_file.empty()) {
      std::ifstream in(c.config_file);
      if (!in) {
        err << "ferryd: cannot read config file " << c.config_file << ": " << std::strerror(errno) << "\n";
        out.exit_code = 2;
        return out;
      }
      // Stored after the command line: po::store keeps the first value, so
      // flags override the file.
      try {
        po::store(po::parse_config_file(in, general), vm);
      } catch (const std::exception& e) {
        err << "ferryd: " << c.config_file << ": " << e.what() << "\n";
        out.exit_code = 2;
        return out;
      }
    }
    po::notify(vm);
  } catch (const std::exception& e) {
    err << "ferryd: " << e.what() << "\n(see ferryd --help)\n";
    out.exit_code = 2;
    return out;
  }

  auto str = [&](const char* key, std::string& dst) {
    if (vm.count(key)) dst = vm[key].as<std::string>();
  };
  str("runtime-dir", c.runtime_dir);
  str("listen", c.listen);
  str("device", c.device);
  str("socket-group", c.socket_group);
  str("auth-secret-file", c.auth_secret_file);
  auto fail = [&](const std::string& msg) {
    err << "ferryd: " << msg << "\n";
    out.exit_code = 2;
    return out;
  };
  if (c.runtime_dir.empty()) return fail("runtime-dir must not be empty");
  if (vm.count("transport")) {
    const auto& t = vm["transport"].as<std::string>();
    if (t == "auto")
      c.transport = Transport::Auto;
    else if (t == "rdma")
      c.transport = Transport::Rdma;
    else if (t == "tcp")
      c.transport = Transport::Tcp;
    else
      return fail("invalid value '" + t + "' for transport: must be one of rdma, tcp, auto");
  }
  if (vm.count("log-level")) {
    const auto& l = vm["log-level"].as<std::string>();
    bool found = false;
    for (auto level : {LogLevel::Trace, LogLevel::Debug, LogLevel::Info, LogLevel::Warn, LogLevel::Error}) {
      if (l == to_string(level)) {
        c.log_level = level;
        found = true;
      }
    }
    if (!found) return fail("invalid value '" + l + "' for log-level: must be one of trace, debug, info, warn, error");
  }
  if (vm.count("gid-index")) {
    const auto& g = vm["gid-index"].as<std::string>();
    auto v = parse_u64(g);
    if (g == "auto" || g == "-1") {
      c.gid_index = -1;
    } else if (!v || *v > 255 || g.find_first_not_of("0123456789") != std::string::npos) {
      return fail("invalid value '" + g + "' for gid-index: must be auto or in [0, 255]");
    } else {
      c.gid_index = static_cast<std::int32_t>(*v);
    }
  }
  if (!c.listen.empty()) {
    auto hp = parse_host_port(c.listen);
    if (!hp || hp->port == 0)
      return fail("invalid value '" + c.listen + "' for listen: must be HOST:PORT, port 1..65535");
  }
  for (const auto& k : kNumericKeys) {
    std::string key(k.key);
    if (!vm.count(key)) continue;
    const auto& text = vm[key].as<std::string>();
    auto v = parse_u64(text);
    std::uint32_t* narrow = nullptr;
    std::uint64_t* wide = field(c, k.key, &narrow);
    if (!v || (narrow != nullptr && *v > UINT32_MAX)) {
      return fail("invalid value '" + text + "' for " + key +
                  ": expected an unsigned integer (see --help for its range)");
    }
    if (wide != nullptr) *wide = *v;
    if (narrow != nullptr) *narrow = static_cast<std::uint32_t>(*v);
  }
  if (auto bad = check_ranges(c)) return fail(*bad);
  if (auto bad = check_system(c)) return fail(*bad);
  EngineFault fault;
  if (auto bad = engine_fault_from_env(&fault)) return fail(*bad);
  c.fault_forget_call_after = fault.forget_call_after;
  return out;
}

std::optional<std::string> check_system(const Config& c) {
  if (!c.socket_group.empty()) {
    group gr{};
    group* found = nullptr;
    char buf[4096];
    if (::getgrnam_r(c.socket_group.c_str(), &gr, buf, sizeof buf, &found) != 0 || found == nullptr) {
      return "invalid value '" + c.socket_group + "' for socket-group: no such group";
    }
  }
  if (!c.auth_secret_file.empty()) {
    const std::string& f = c.auth_secret_file;
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) {
      return "invalid value '" + f + "' for auth-secret-file: " + std::strerror(errno);
    }
    if (!S_ISREG(st.st_mode)) return "invalid value '" + f + "' for auth-secret-file: not a regular file";
    if ((st.st_mode & 0077) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return "invalid value '" + f + "' for auth-secret-file: mode " + mode +
             " lets group or others in; must be 0600 or 0400 (chmod 600)";
    }
    if (::access(f.c_str(), R_OK) != 0) {
      return "invalid value '" + f + "' for auth-secret-file: not readable: " + std::strerror(errno);
    }
    std::string secret;  // read here too so --check-config reports a short secret
    if (auto bad = peer::load_auth_secret(f, secret)) return bad;
  }
  return std::nullopt;
}

std::string describe(const Config& c) {
  std::ostringstream os;
  auto text = [&](std::string_view key, const std::string& v) { os << key << " = " << v << "\n"; };
  os << "# config file: " << (c.config_file.empty() ? "(none)" : c.config_file) << "\n";
  text("runtime-dir", c.runtime_dir);
  text("listen", c.listen);
  text("transport", std::string(to_string(c.transport)));
  text("device", c.device);
  text("gid-index", c.gid_index < 0 ? "auto" : std::to_string(c.gid_index));
  text("log-level", std::string(to_string(c.log_level)));
  text("socket-group", c.socket_group);
  text("auth-secret-file", c.auth_secret_file);
  Config copy = c;  // field() hands out mutable pointers
  for (const auto& k : kNumericKeys) {
    std::uint32_t* narrow = nullptr;
    std::uint64_t* wide = field(copy, k.key, &narrow);
    os << k.key << " = " << (wide != nullptr ? *wide : narrow != nullptr ? *narrow : 0) << "\n";
  }
  return os.str();
}

}  // namespace ferry::daemon
