// ferryd's configuration: every tunable is a field of Config with its
// default as the field's initializer; its name, type, range, unit, help and
// reload behaviour are one row of the descriptor table (config_keys.cpp),
// from which the parser, the range checks, --help, --describe, the example
// ferryd.conf, the man page's option list and docs/configuration.md all
// come. Read once at start-up from the command line and an optional INI
// file (same keys as the long flags; flags win; /etc/ferry/ferryd.conf when
// --config is not given and it exists). SIGHUP parses both again and applies
// what can change live (daemon/config/config_reload.h); the rest needs a restart.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/error.h"
#include "shm/ring_entries.h"
#include "shm/segment_layout.h"
#include "shm/slab_allocator.h"

namespace ferry::daemon {

enum class Transport : std::uint8_t { Auto, Rdma, Tcp };
std::string_view to_string(Transport t) noexcept;

enum class LogLevel : std::uint8_t { Trace, Debug, Info, Warn, Error };
std::string_view to_string(LogLevel l) noexcept;

// engine-spin-hold: whether the in-flight spin holds until the answer
// (bounded by kSpinHoldMaxUs) instead of turning itself off (spin_policy.h).
// auto: hold on software RDMA providers (rxe, siw), adaptive elsewhere.
enum class SpinHold : std::uint8_t { Auto, On, Off };
// engine-compact (engines/compaction.h): Default is on, unless the
// environment says FERRYD_ENGINE_COMPACT=off (test runs: engine_cpus.h).
enum class EngineCompact : std::uint8_t { Default, On, Off };
std::string_view to_string(SpinHold h) noexcept;

inline constexpr std::uint64_t kKiB = 1ull << 10;
inline constexpr std::uint64_t kMiB = 1ull << 20;
inline constexpr std::uint64_t kGiB = 1ull << 30;

// Read when --config is not given and the file exists.
inline constexpr std::string_view kDefaultConfigFile = "/etc/ferry/ferryd.conf";

// Ranges, units and meanings: config_keys.cpp (and ferryd --help).
struct Config {
  std::string runtime_dir = "/run/ferry";
  std::string listen;  // empty = no peers
  Transport transport = Transport::Auto;
  std::string device;  // empty = first found
  std::string config_file;
  // Datapath engines (daemon/engines/): 0 = auto (engines_for_cpus), and
  // the CPUs to pin them to ("" = not pinned; "2,3,8-11").
  std::uint32_t engines = 0;
  std::string engine_cpus;
  // Engine 0's thread runs the other engines' turns while traffic is light
  // (engines/compaction.h).
  EngineCompact engine_compact = EngineCompact::Default;
  std::uint32_t engine_threads = 0;  // most engines on their own threads at once; 0 = auto
  // FERRY_FAULT_ENGINE=forget-call-after=N (engine_fault.h; tests only), 0 = off.
  std::uint64_t fault_forget_call_after = 0;
  LogLevel log_level = LogLevel::Info;
  std::string socket_group;      // empty = ferryd's own group
  std::string admin_group;       // empty = root (and ferryd's own user) only
  std::string service_owners;    // "NAME:USER,..." names reserved to a uid (daemon/serve/services.h)
  std::string auth_secret_file;  // empty = no peer auth
  std::int32_t gid_index = -1;   // -1 = auto

  // Per-client segment: the defaults a client gets when it asks for 0, and
  // the most it may ask for.
  std::uint64_t tx_arena_bytes = 32 * kMiB;
  std::uint64_t max_tx_arena_bytes = 1 * kGiB;
  std::uint64_t rx_arena_bytes = 32 * kMiB;
  std::uint64_t max_rx_arena_bytes = 1 * kGiB;
  std::uint32_t sq_entries = 1024;
  std::uint32_t cq_entries = 4096;

  // Quotas on attached clients, checked at attach.
  std::uint32_t max_clients = 256;
  std::uint32_t max_clients_per_uid = 128;
  std::uint64_t max_memory_bytes = 32 * kGiB;
  std::uint64_t max_memory_bytes_per_uid = 16 * kGiB;

  // The control socket.
  std::uint32_t control_max_connections = 64;
  std::uint32_t control_idle_timeout_ms = 30000;
  std::uint64_t control_output_bytes = 1 * kMiB;

  std::uint32_t max_message_bytes = shm::kSlabBytes;
  std::uint32_t delivery_timeout_ms = 30000;
  std::uint32_t rdma_windows = 1024;
  std::uint32_t call_timeout_ms = 60000;
  std::uint32_t engine_spin_us = 50;
  std::uint32_t engine_yield_after_us = 2;  // idle this long before a spinning turn yields
  bool engine_yield_watch = false;          // a long yield stops the yields for a while (loop/yield_watch.h)
  std::uint32_t engine_spin_inflight_us = 1000;
  SpinHold engine_spin_hold = SpinHold::Auto;
  std::uint32_t engine_spin_bulk_bytes = 256 * 1024;  // where the hold applies: no in-flight spin past this
  std::uint32_t engine_clock_stride = 0;              // idle turns per clock read while yielding; 0: auto
  std::uint32_t rdma_eager_response_bytes = 4096;

  // Channels between daemons (daemon/peer/).
  std::uint32_t heartbeat_ms = 500;
  std::uint32_t peer_timeout_ms = 3000;
  std::uint32_t connect_timeout_ms = 2000;
  std::uint32_t max_channels = 0;  // 0: no cap
  std::uint32_t channel_conns = 1;
  // Endpoints one client may have open (daemon/session/client_session.h).
  std::uint32_t max_endpoints_per_client = 4096;
  // The tcp transport's connections to and from peers: every channel's
  // bootstrap connection, and on tcp its data lanes (transport/tcp/).
  std::uint32_t peer_max_connections = 64;
  // Accepted peer connections not yet taken by a channel (transport/accept_guard.h).
  std::uint32_t peer_hello_timeout_ms = 2000;
  std::uint32_t peer_max_unauthenticated_per_source = 16;
  std::uint64_t staging_bytes = 8 * kMiB;

  // rdma data lanes (daemon/peer/transport_choice.h). 8 KiB keeps a QP's slabs
  // at ~2 MiB while covering parameter-server keys and small tensors.
  std::uint32_t eager_threshold = 8192;
  std::uint32_t rdma_ack_timeout = 14;
  std::uint32_t rdma_max_connections = 64;

  // Flow control: windows on remote operations in flight; 0 turns one off.
  std::uint32_t endpoint_window_ops = 32;
  std::uint32_t channel_window_ops = 512;
  std::uint64_t channel_window_bytes = 32 * kMiB;
  std::uint64_t nic_window_bytes = 128 * kMiB;
  std::uint32_t max_reads_inflight = 8;
  // Several rails: a rendezvous READ of at least this many bytes is split
  // over lanes on different rails (daemon/serve/rendezvous.h); 0: never.
  std::uint32_t rail_split_bytes = 256 * 1024;
  // Receive credits (daemon/peer/receive_pool.h): the shared pool, each
  // lane's floor and its share.
  std::uint32_t receive_pool = 1024;
  std::uint32_t credit_floor = 4;
  std::uint32_t credit_share = 128;
};

// Checks every numeric field against its range and the cross-field rules
// (config_rules.cpp). Returns BadRequest with a message naming the key(s)
// and the allowed range, or Ok when all is well.
[[nodiscard]] Error check_ranges(const Config& c);

struct ParseOutcome {
  Config config;
  int exit_code = -1;         // >= 0: exit now with this code (help printed, or error)
  bool check_config = false;  // --check-config: validate, print, exit
};

// Parses argv (and --config FILE, else kDefaultConfigFile when it exists).
// Prints --help, --version and --describe itself; errors go to `err`
// ("ferryd: <message>" lines). Exit code 2 for bad usage or values, 0 for
// --help, --version and --describe.
ParseOutcome parse_command_line(int argc, const char* const* argv, std::ostream& err);
ParseOutcome parse_command_line(int argc, const char* const* argv);  // errors to stderr

// Checks that need the system: socket-group and admin-group name existing
// groups, auth-secret-file is a regular file that group and others cannot
// read and holds a long enough secret (peer/auth_secret.h). Returns
// BadRequest with a message naming the key, or Ok.
[[nodiscard]] Error check_system(const Config& c);

// The effective settings, one "key = value" line each (INI, so the output
// of --check-config is itself a valid config file).
std::string describe(const Config& c);

}  // namespace ferry::daemon
