// ferryd's configuration: every tunable in one struct with its documented
// default and allowed range (STYLE.md habit 12). Read once at start-up from
// the command line and an optional INI file (same keys as the long flags;
// flags win; /etc/ferry/ferryd.conf when --config is not given and it
// exists). SIGHUP parses both again and applies what can change live
// (daemon/config_reload.h); the rest needs a restart.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shm/ring_entries.h"
#include "shm/segment_layout.h"
#include "shm/slab_allocator.h"

namespace ferry::daemon {

enum class Transport : std::uint8_t { Auto, Rdma, Tcp };
std::string_view to_string(Transport t) noexcept;

enum class LogLevel : std::uint8_t { Trace, Debug, Info, Warn, Error };
std::string_view to_string(LogLevel l) noexcept;

inline constexpr std::uint64_t kMiB = 1ull << 20;
inline constexpr std::uint64_t kGiB = 1ull << 30;

// Read when --config is not given and the file exists.
inline constexpr std::string_view kDefaultConfigFile = "/etc/ferry/ferryd.conf";

struct Config {
  std::string runtime_dir = "/run/ferry";
  std::string listen;  // bootstrap HOST:PORT; empty = none
  Transport transport = Transport::Auto;
  std::string device;  // RDMA device name; empty = first found
  std::string config_file;
  // FERRY_FAULT_ENGINE=forget-call-after=N (engine_fault.h; tests only), 0 = off.
  std::uint64_t fault_forget_call_after = 0;
  LogLevel log_level = LogLevel::Info;
  std::string socket_group;      // group given the sockets (mode 0660); empty = ferryd's own group
  std::string auth_secret_file;  // peer shared secret (daemon/peer/channel_auth.cpp); empty = no peer auth
  std::int32_t gid_index = -1;   // RDMA source GID index: -1 = auto (RoCE v2 GID of the address), 0..255

  // Per-client segment sizes: the defaults a client gets when it asks for 0,
  // and the most it may ask for.
  std::uint64_t tx_arena_bytes = 32 * kMiB;           // [1 MiB, max_tx_arena_bytes]
  std::uint64_t max_tx_arena_bytes = 1 * kGiB;        // [1 MiB, 1 GiB]
  std::uint64_t rx_arena_bytes = 32 * kMiB;           // [1 MiB, max_rx_arena_bytes]
  std::uint64_t max_rx_arena_bytes = 1 * kGiB;        // [1 MiB, 1 GiB]
  std::uint32_t sq_entries = 1024;                    // power of two, [64, 65536]
  std::uint32_t cq_entries = 4096;                    // power of two, [64, 65536]
  std::uint32_t max_clients = 256;                    // [1, 4096]
  std::uint32_t max_message_bytes = shm::kSlabBytes;  // [64, 1 MiB]
  std::uint32_t delivery_timeout_ms = 30000;          // [1, 3600000]
  std::uint32_t rdma_windows = 1024;                  // [0 = keys to the whole tx arena, 65536]
  std::uint32_t call_timeout_ms = 60000;              // [0 = none, 3600000]; a Call's own timeout_ms wins
  std::uint32_t engine_spin_us = 50;                  // [0, 100000] busy-poll before sleeping
  std::uint32_t engine_spin_inflight_us = 1000;       // [0, 100000] the same while calls are in flight

  // Channels between daemons (daemon/peer/).
  std::uint32_t heartbeat_ms = 500;         // [10, 60000] heartbeat interval on the bootstrap connection
  std::uint32_t peer_timeout_ms = 3000;     // [20, 600000] silence after which a peer is dead (PeerReset)
  std::uint32_t connect_timeout_ms = 2000;  // [1, 60000] connect + handshake bound (PeerUnreachable)
  std::uint32_t channel_conns = 1;          // [1, 8] data connections per channel (tcp)
  std::uint64_t staging_bytes = 8 * kMiB;   // [0, 1 GiB] back-pressure staging per daemon; past it: Busy

  // rdma data lanes (daemon/transport_choice.h).
  // Largest message sent eagerly (one SEND into a receive slot the peer
  // daemon posted); each receive/send slot is this + the 48-byte header, 128
  // slots per QP each way. 8 KiB keeps a QP's slabs at ~2 MiB while covering
  // parameter-server keys and small tensors. Larger messages over rdma are
  // NotSupported until rendezvous (RDMA READ) lands.
  std::uint32_t eager_threshold = 8192;  // [4096, 1 MiB]
  // IB local ACK timeout exponent (4.096 us * 2^n): 14 for real NICs,
  // 18..20 under the Soft-RoCE VM, which drops and delays.
  std::uint32_t rdma_ack_timeout = 14;  // [1, 31]

  // Flow control (README "Flow control"). A remote Send/Call is in flight
  // from the moment this daemon posts it until the peer's answer; past any
  // window it waits here, in order, until room frees or delivery-timeout-ms
  // passes (then Timeout). 0 turns a window off.
  std::uint32_t endpoint_window_ops = 32;          // [0, 65536] per endpoint: one slow service stalls only its senders
  std::uint32_t channel_window_ops = 512;          // [0, 65536] per channel (peer)
  std::uint64_t channel_window_bytes = 32 * kMiB;  // [0, 4 GiB] request bytes per channel
  std::uint64_t nic_window_bytes = 128 * kMiB;     // [0, 4 GiB] request bytes over every channel of the data transport
  // Receiver side: rendezvous RDMA READs this daemon has in flight per
  // channel; more wait in arrival order.
  std::uint32_t max_reads_inflight = 8;  // [1, 256]
};

// One tunable's allowed range, for checks and error messages.
struct Range {
  std::string_view key;
  std::uint64_t min;
  std::uint64_t max;
  bool power_of_two = false;
};

// Checks every numeric field against its range. Returns an error message
// naming the key and the allowed range, or nullopt when all is well.
std::optional<std::string> check_ranges(const Config& c);

struct ParseOutcome {
  Config config;
  int exit_code = -1;         // >= 0: exit now with this code (help printed, or error)
  bool check_config = false;  // --check-config: validate, print, exit
};

// Parses argv (and --config FILE, else kDefaultConfigFile when it exists).
// Prints --help itself; errors go to `err` ("ferryd: <message>" lines).
// Exit code 2 for bad usage or values, 0 for --help.
ParseOutcome parse_command_line(int argc, const char* const* argv, std::ostream& err);
ParseOutcome parse_command_line(int argc, const char* const* argv);  // errors to stderr

// Checks that need the system: socket-group names an existing group,
// auth-secret-file is a readable regular file that group and others cannot
// read and holds a long enough secret (peer/auth_secret.h). Returns an error
// naming the key, or nullopt.
std::optional<std::string> check_system(const Config& c);

// The effective settings, one "key = value" line each (INI, so the output
// of --check-config is itself a valid config file).
std::string describe(const Config& c);

}  // namespace ferry::daemon
