// ferryd's configuration: every tunable in one struct with its documented
// default and allowed range (STYLE.md habit 12). Read once at start-up from
// the command line and an optional INI file (same keys as the long flags;
// flags win), then never changed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shm/segment_layout.h"
#include "shm/slab_allocator.h"

namespace ferry::daemon {

enum class Transport : std::uint8_t { Auto, Rdma, Tcp };
std::string_view to_string(Transport t) noexcept;

enum class LogLevel : std::uint8_t { Trace, Debug, Info, Warn, Error };
std::string_view to_string(LogLevel l) noexcept;

inline constexpr std::uint64_t kMiB = 1ull << 20;
inline constexpr std::uint64_t kGiB = 1ull << 30;

struct Config {
  std::string runtime_dir = "/run/ferry";
  std::string listen;  // bootstrap HOST:PORT; empty = none
  Transport transport = Transport::Auto;
  std::string device;  // RDMA device name; empty = first found
  std::string config_file;
  LogLevel log_level = LogLevel::Info;

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
  std::uint32_t engine_spin_us = 50;                  // [0, 100000] busy-poll before sleeping
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
  int exit_code = -1;  // >= 0: exit now with this code (help printed, or error)
};

// Parses argv (and --config FILE). Prints --help or the error itself.
// Exit code 2 for bad usage or values, 0 for --help.
ParseOutcome parse_command_line(int argc, const char* const* argv);

}  // namespace ferry::daemon
