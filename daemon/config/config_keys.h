// The descriptor table: one row per ferryd option (config_keys.cpp). The
// parser, the range checks, --help, --describe, the example ferryd.conf, the
// man page's option list and docs/configuration.md are all made from it
// (config_docs.h), and a test fails when a checked-in copy drifts.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "daemon/config/config.h"

namespace ferry::daemon {

enum class ValueKind : std::uint8_t {
  Number,  // unsigned integer (sizes take a binary k/m/g suffix)
  Text,    // free text: a path, a name
  Choice,  // one of `choices`
  Flag,    // command line only, takes no value (--help, --check-config)
};
std::string_view to_string(ValueKind k) noexcept;

enum class Unit : std::uint8_t { None, Bytes, Millis, Micros, Entries, Count };
std::string_view to_string(Unit u) noexcept;

// What a SIGHUP does with a changed value (config_reload.h).
enum class Reload : std::uint8_t {
  Restart,     // logged as "needs a restart"; the running value stays
  Live,        // applied at once
  NewClients,  // applied to clients that attach afterwards
  Never,       // command-line only: not part of the configuration
};
std::string_view to_string(Reload r) noexcept;

// Where a key may appear.
enum class Scope : std::uint8_t {
  Anywhere,     // the command line and the configuration file
  CommandLine,  // the command line only (--help, --config, ...): an error in a file
};

// How a row reads and writes its Config field. `parse` returns BadRequest
// with the reason a text is not a valid value (without the key; the caller
// adds it), or Ok. `text` renders the value as a configuration file writes it.
// `number`: Number rows only, the value for range checks.
struct KeyAccess {
  Error (*parse)(Config&, std::string_view) = nullptr;
  std::string (*text)(const Config&) = nullptr;
  std::uint64_t (*number)(const Config&) = nullptr;
};

struct ConfigKey {
  std::string_view name;  // the flag without "--" and the file key
  std::string_view section;
  ValueKind kind = ValueKind::Text;
  Unit unit = Unit::None;
  std::string_view value_name;  // in --help and the man page: N, DIR, HOST:PORT
  std::uint64_t min = 0;
  std::uint64_t max = 0;
  std::string_view max_key;  // Number: the upper bound is that key's value (not `max`)
  bool power_of_two = false;
  std::string_view choices;  // Choice: "a|b|c"
  Reload reload = Reload::Restart;
  Scope scope = Scope::Anywhere;
  std::string_view summary;  // one line: --help and the reference table
  std::string_view details;  // more prose for the example file, man page and reference; may be empty
  KeyAccess access;
};

// Every row, in the order --help and the documents list them.
std::span<const ConfigKey> config_keys() noexcept;
// The row named `name`, or nullptr.
[[nodiscard]] const ConfigKey* find_key(std::string_view name) noexcept;

// The value of `key` in `c` as a configuration file writes it (sizes with
// their largest exact binary suffix: 32m, 1g). Flags: empty.
std::string value_text(const ConfigKey& key, const Config& c);
// The default, i.e. value_text of a default-constructed Config.
std::string default_text(const ConfigKey& key);
// "in [1, 4096]", "a power of two in [64, 65536]", "in [1m, max-tx-arena-bytes]",
// "one of rdma, tcp, auto"; empty for free text.
std::string range_text(const ConfigKey& key);

// Sizes and counts: plain decimal, optionally with a binary suffix k/m/g
// (case-insensitive). nullopt when malformed or past 2^64.
[[nodiscard]] std::optional<std::uint64_t> parse_u64(std::string_view s) noexcept;
// Whole mebibytes and gibibytes get their suffix (33554432 -> "32m");
// anything else stays decimal (8192).
std::string format_size(std::uint64_t v);

}  // namespace ferry::daemon
