// The descriptor table (config_keys.h): every ferryd option, once. A new
// tunable is a Config field (config.h, its default as the initializer) and
// one row here; `ninja -C build config-docs` then rewrites the example file,
// the man page's option list and docs/configuration.md.
#include "daemon/config/config_keys.h"

#include <arpa/inet.h>

#include <limits>
#include <type_traits>
#include <vector>

#include "daemon/engines/engine_cpus.h"
#include "daemon/engines/target.h"
#include "shm/ring_entries.h"
#include "shm/segment_layout.h"
#include "transport/wire/handshake.h"

namespace ferry::daemon {
namespace {

Error not_unsigned() { return Error::bad_request("expected an unsigned integer (see --help for its range)"); }

template <auto M>
Error parse_number(Config& c, std::string_view t) {
  using T = std::remove_cvref_t<decltype(c.*M)>;
  const auto v = parse_u64(t);
  if (!v || *v > std::numeric_limits<T>::max()) return not_unsigned();
  c.*M = static_cast<T>(*v);
  return {};
}

template <auto M>
std::uint64_t number_of(const Config& c) {
  return c.*M;
}

template <auto M>
constexpr KeyAccess number() {
  return {parse_number<M>, nullptr, number_of<M>};
}

template <auto M>
Error parse_text(Config& c, std::string_view t) {
  c.*M = std::string(t);
  return {};
}

template <auto M>
std::string text_of(const Config& c) {
  return c.*M;
}

template <auto M>
constexpr KeyAccess text() {
  return {parse_text<M>, text_of<M>, nullptr};
}

// "auto" (or 0) or a count of engines in [1, kMaxEngines]: --engines,
// --engine-threads.
template <auto M>
Error parse_engine_count(Config& c, std::string_view t) {
  if (t == "auto" || t == "0") {
    c.*M = 0;
    return {};
  }
  const auto v = t.find_first_not_of("0123456789") == std::string_view::npos ? parse_u64(t) : std::nullopt;
  if (!v || *v < 1 || *v > kMaxEngines)
    return Error::bad_request("must be auto or in [1, " + std::to_string(kMaxEngines) + "]");
  c.*M = static_cast<std::uint32_t>(*v);
  return {};
}

template <auto M>
std::string engine_count_of(const Config& c) {
  return c.*M == 0 ? std::string("auto") : std::to_string(c.*M);
}

template <auto M>
constexpr KeyAccess engine_count() {
  return {parse_engine_count<M>, engine_count_of<M>, nullptr};
}

constexpr KeyAccess runtime_dir_access{[](Config& c, std::string_view t) -> Error {
                                         if (t.empty()) return Error::bad_request("must not be empty");
                                         c.runtime_dir = std::string(t);
                                         return {};
                                       },
                                       text_of<&Config::runtime_dir>};

constexpr KeyAccess listen_access{
    [](Config& c, std::string_view t) -> Error {
      if (!t.empty()) {
        auto hp = parse_host_port(t);
        if (!hp || hp->port == 0) return Error::bad_request("must be HOST:PORT, port 1..65535");
        // Start-up binds without resolving names: refuse them here too, so
        // --check-config and start-up agree.
        unsigned char addr[16];
        if (::inet_pton(AF_INET, hp->host.c_str(), addr) != 1 && ::inet_pton(AF_INET6, hp->host.c_str(), addr) != 1)
          return Error::bad_request(
              "the host must be a numeric IPv4 or IPv6 address (HOST:PORT, names are not resolved), not '" + hp->host +
              "'");
      }
      c.listen = std::string(t);
      return {};
    },
    text_of<&Config::listen>};

constexpr KeyAccess transport_access{[](Config& c, std::string_view t) -> Error {
                                       for (auto v : {Transport::Rdma, Transport::Tcp, Transport::Auto}) {
                                         if (t == to_string(v)) {
                                           c.transport = v;
                                           return {};
                                         }
                                       }
                                       return Error::bad_request("must be one of rdma, tcp, auto");
                                     },
                                     [](const Config& c) { return std::string(to_string(c.transport)); }};

constexpr KeyAccess spin_hold_access{[](Config& c, std::string_view t) -> Error {
                                       for (auto v : {SpinHold::Auto, SpinHold::On, SpinHold::Off}) {
                                         if (t == to_string(v)) {
                                           c.engine_spin_hold = v;
                                           return {};
                                         }
                                       }
                                       return Error::bad_request("must be one of auto, on, off");
                                     },
                                     [](const Config& c) { return std::string(to_string(c.engine_spin_hold)); }};

constexpr KeyAccess engine_compact_access{
    [](Config& c, std::string_view t) -> Error {
      if (t != "on" && t != "off") return Error::bad_request("must be on or off");
      c.engine_compact = t == "on" ? EngineCompact::On : EngineCompact::Off;
      return {};
    },
    [](const Config& c) { return std::string(c.engine_compact == EngineCompact::Off ? "off" : "on"); }};

constexpr KeyAccess yield_watch_access{
    [](Config& c, std::string_view t) -> Error {
      if (t != "on" && t != "off") return Error::bad_request("must be on or off");
      c.engine_yield_watch = t == "on";
      return {};
    },
    [](const Config& c) { return std::string(c.engine_yield_watch ? "on" : "off"); }};

constexpr KeyAccess log_level_access{
    [](Config& c, std::string_view t) -> Error {
      for (auto v : {LogLevel::Trace, LogLevel::Debug, LogLevel::Info, LogLevel::Warn, LogLevel::Error}) {
        if (t == to_string(v)) {
          c.log_level = v;
          return {};
        }
      }
      return Error::bad_request("must be one of trace, debug, info, warn, error");
    },
    [](const Config& c) { return std::string(to_string(c.log_level)); }};

constexpr KeyAccess gid_index_access{
    [](Config& c, std::string_view t) -> Error {
      if (t == "auto" || t == "-1") {
        c.gid_index = -1;
        return {};
      }
      const auto v = t.find_first_not_of("0123456789") == std::string_view::npos ? parse_u64(t) : std::nullopt;
      if (!v || *v > 255) return Error::bad_request("must be auto or in [0, 255]");
      c.gid_index = static_cast<std::int32_t>(*v);
      return {};
    },
    [](const Config& c) { return c.gid_index < 0 ? std::string("auto") : std::to_string(c.gid_index); }};

constexpr KeyAccess engine_cpus_access{[](Config& c, std::string_view t) -> Error {
                                         std::vector<int> cpus;
                                         if (const Error bad = parse_cpu_list(t, cpus); bad.failed()) return bad;
                                         c.engine_cpus = std::string(t);
                                         return {};
                                       },
                                       [](const Config& c) { return c.engine_cpus; }};

constexpr KeyAccess config_file_access = text<&Config::config_file>();

constexpr std::string_view kCommandLine = "Command line";
constexpr std::string_view kServing = "Where and how ferryd serves";
constexpr std::string_view kAccess = "Access and security";
constexpr std::string_view kSegment = "Per-client shared-memory segment";
constexpr std::string_view kQuotas = "Quotas on clients";
constexpr std::string_view kControl = "Control socket";
constexpr std::string_view kTiming = "Messages and timing";
constexpr std::string_view kChannels = "Channels to peer daemons";
constexpr std::string_view kFlow = "Flow control";

constexpr std::uint64_t kMinArena = shm::kMinArenaBytes;
constexpr std::uint64_t kRingMin = shm::kMinRingEntries;
constexpr std::uint64_t kRingMax = shm::kMaxRingEntries;
constexpr std::uint64_t kTiB = 1024 * kGiB;

// Rows name only the fields they set; the rest keep ConfigKey's defaults.
// g++ 12 warns about designated initializers that leave fields out, even
// fields with default member initializers, so the warning is off here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
// clang-format off
constexpr ConfigKey kKeys[] = {
    {.name = "help", .section = kCommandLine, .kind = ValueKind::Flag, .reload = Reload::Never,
     .scope = Scope::CommandLine, .summary = "print this help and exit"},
    {.name = "version", .section = kCommandLine, .kind = ValueKind::Flag, .reload = Reload::Never,
     .scope = Scope::CommandLine,
     .summary = "print the version and whether the test-only fault switches are compiled in, and exit"},
    {.name = "describe", .section = kCommandLine, .kind = ValueKind::Flag, .reload = Reload::Never,
     .scope = Scope::CommandLine,
     .summary = "print every option's descriptor (name, type, default, range, unit, reload, help) as JSON and exit"},
    {.name = "config", .section = kCommandLine, .value_name = "FILE", .reload = Reload::Never,
     .scope = Scope::CommandLine,
     .summary = "read this configuration file [/etc/ferry/ferryd.conf when it exists]",
     .details = "An INI file with the same keys as the long flags, one key = value per line; # starts a comment. "
                "Flags override the file. It must be a regular file of at most 1 MiB: a directory, a device or a "
                "FIFO is refused. A key that is unknown, given twice, or command-line only (help, config, "
                "check-config, ...) is an error naming the file and line.",
     .access = config_file_access},
    {.name = "check-config", .section = kCommandLine, .kind = ValueKind::Flag, .reload = Reload::Never,
     .scope = Scope::CommandLine,
     .summary = "validate the configuration, print the effective settings and exit (0 ok, 2 bad)",
     .details = "Runs every check start-up runs on the configuration (ranges, cross-field rules, groups, the "
                "secret file, the listen address) and prints the effective settings as a valid configuration "
                "file."},

    {.name = "runtime-dir", .section = kServing, .value_name = "DIR",
     .summary = "directory for ferryd.sock (clients) and control.sock (ferryctl)",
     .details = "Created with mode 0755 when missing. It must belong to root or to the user ferryd runs as and "
                "must not be writable by group or others (0755 or stricter): whoever may write to it could "
                "replace the sockets. The systemd unit's RuntimeDirectory=ferry creates /run/ferry.",
     .access = runtime_dir_access},
    {.name = "listen", .section = kServing, .value_name = "HOST:PORT",
     .summary = "bootstrap address where peer daemons connect; empty: no remote peers",
     .details = "HOST is a numeric IPv4 or IPv6 address ([::1]:7000); names are not resolved. Port 1..65535.",
     .access = listen_access},
    {.name = "transport", .section = kServing, .kind = ValueKind::Choice, .choices = "rdma|tcp|auto",
     .summary = "data transport; auto: rdma when an RDMA device exists, else tcp", .access = transport_access},
    {.name = "device", .section = kServing, .value_name = "NAME[,NAME...]|all",
     .summary = "RDMA device(s) for the data lanes, e.g. mlx5_0 or mlx5_0,mlx5_1; all: every device with an IPv4 "
                "RoCE v2 GID; empty: the device of the --listen address",
     .details = "Several devices make several rails (docs/rails.md): the lanes of every channel spread over them "
                "(lane i on the i-th rail that is up), client segments are registered on each, and a rail whose "
                "port goes down is taken out (its lanes rebuild on the others, losing nothing) until it is up "
                "again. NAME@ADDR gives a device's local IPv4 address; without it the address is the --listen host "
                "when the device has it, else the device's first IPv4 RoCE v2 GID. The rail of the --listen "
                "address comes first. At most 4.",
     .access = text<&Config::device>()},
    {.name = "engines", .section = kServing, .value_name = "N|auto",
     .summary = "datapath engines (1..64); auto: one per four CPUs ferryd may run on, at least 1",
     .details = "Each engine is a whole datapath, on its own thread while it is busy (engine-compact), sharing "
                "nothing with the others: the clients "
                "placed on it at attach (the least loaded engine, or the one a client asks for with "
                "FERRY_ENGINE), their rings and calls, and its own channels to peer daemons. An op for a service "
                "or a channel of another engine crosses to it through a ring between the two engines. auto counts "
                "the CPUs of ferryd's affinity mask (taskset, systemd CPUAffinity=) at start-up; the environment "
                "variable FERRYD_ENGINES, when set, replaces auto. With --listen HOST:PORT engine i listens for "
                "peers on PORT+i (docs/protocol.md).",
     .access = engine_count<&Config::engines>()},
    {.name = "engine-cpus", .section = kServing, .value_name = "LIST",
     .summary = "CPUs to pin the engines to, e.g. 2,3 or 8-15 (engine i on the i-th, wrapping); empty: not pinned",
     .details = "Pinning keeps an engine and its clients on one NUMA node: pin the engines there and start the "
                "clients with FERRY_ENGINE naming them. A CPU ferryd may not run on fails start-up.",
     .access = engine_cpus_access},
    {.name = "engine-compact", .section = kServing, .kind = ValueKind::Choice, .choices = "on|off",
     .summary = "while traffic is light, engine 0's thread runs the other engines' turns (on, the default)",
     .details = "An engine is its clients, channels and calls, not its thread: while the daemon's traffic fits one "
                "core, engine 0's thread turns every engine, so an operation that needs two engines wakes no "
                "second thread and one spinner serves them all. An engine busy less than 15 % of 50 ms, with engine "
                "0's thread under 45 % with it, joins engine 0's thread; when that thread is busy more than 70 % of "
                "50 ms, the engine that took most of it goes back to its own thread (and stays at least a second). "
                "The status JSON's engines carry thread, the engine whose thread runs each; counters "
                "engine_compactions and engine_expansions. off: every engine always on its own thread (with "
                "--engine-cpus, an engine hosted by engine 0 runs on engine 0's CPU).",
     .access = engine_compact_access},
    {.name = "engine-threads", .section = kServing, .value_name = "N|auto",
     .summary = "with engine-compact on, at most this many engines on threads of their own at once; auto: as "
                "many as engines auto would run",
     .details = "auto is one per four CPUs ferryd may run on, at least 1, at most --engines: a host of 2 CPUs "
                "runs every engine on engine 0's thread, whatever its load, since a second engine thread there "
                "would only take the core its clients need. With --engines auto it never binds.",
     .access = engine_count<&Config::engine_threads>()},
    {.name = "gid-index", .section = kServing, .value_name = "auto|N",
     .summary = "RDMA source GID index: auto (the RoCE v2 GID of the listen address) or 0..255",
     .details = "A number forces one entry of the port's GID table (see show_gids).", .access = gid_index_access},
    {.name = "log-level", .section = kServing, .kind = ValueKind::Choice, .choices = "trace|debug|info|warn|error",
     .reload = Reload::Live, .summary = "log verbosity", .access = log_level_access},

    {.name = "socket-group", .section = kAccess, .value_name = "GROUP",
     .summary = "group given ferryd.sock and control.sock (mode 0660); empty: ferryd's own group",
     .details = "Its members may attach clients and run ferryctl's read-only commands. The group must exist.",
     .access = text<&Config::socket_group>()},
    {.name = "admin-group", .section = kAccess, .value_name = "GROUP", .reload = Reload::Live,
     .summary = "group whose members may also run privileged control commands (drain, resume); empty: root only",
     .details = "Root and the user ferryd runs as may always run them; a member of socket-group who is neither "
                "gets PermissionDenied. Membership is read from the connecting process's credentials "
                "(SO_PEERCRED and its supplementary groups). The group must exist.",
     .access = text<&Config::admin_group>()},
    {.name = "service-owners", .section = kAccess, .value_name = "NAME:USER,...",
     .summary = "service names reserved to a user (name or uid); empty: every name is first come, first served",
     .details = "A Serve of a reserved name by a client of another uid fails PermissionDenied and is logged, so "
                "no other user can take a well-known name and receive its callers' requests. Names not listed "
                "stay first come, first served. Example: ps-shard-0:alice,ps-shard-1:1001",
     .access = text<&Config::service_owners>()},
    {.name = "auth-secret-file", .section = kAccess, .value_name = "FILE",
     .summary = "shared secret that peer daemons must prove they know; empty: no peer authentication",
     .details = "With it every channel to another ferryd starts with a challenge-response (HMAC-SHA256 over fresh "
                "random nonces of both daemons, their epochs and a direction label): a peer must prove it holds "
                "the same secret before any data lane joins or any Open is served. Give every daemon that talks "
                "to this one the same file. A daemon with a secret refuses a peer without one and vice versa; a "
                "refusal logs \"authentication failed\" on both daemons, counts in peer_auth_failures, and fails "
                "the client's Open with PermissionDenied. The secret is never logged. It authenticates daemons "
                "and the handshake; it does not encrypt or sign the data frames that follow. The file must be a "
                "regular file readable by ferryd and not by group or others (mode 0600 or 0400), holding 16 to "
                "4096 bytes after a trailing newline is trimmed. Read once at start-up, through one descriptor: "
                "a new secret needs a restart. Make one: head -c 32 /dev/urandom | base64 > /etc/ferry/peer.secret",
     .access = text<&Config::auth_secret_file>()},

    {.name = "tx-arena-bytes", .section = kSegment, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = kMinArena, .max_key = "max-tx-arena-bytes", .reload = Reload::NewClients,
     .summary = "default tx arena per client (a client asking for 0 gets it)",
     .access = number<&Config::tx_arena_bytes>()},
    {.name = "max-tx-arena-bytes", .section = kSegment, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = kMinArena, .max = kGiB, .reload = Reload::NewClients,
     .summary = "largest tx arena a client may ask for", .access = number<&Config::max_tx_arena_bytes>()},
    {.name = "rx-arena-bytes", .section = kSegment, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = kMinArena, .max_key = "max-rx-arena-bytes", .reload = Reload::NewClients,
     .summary = "default rx arena per client", .access = number<&Config::rx_arena_bytes>()},
    {.name = "max-rx-arena-bytes", .section = kSegment, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = kMinArena, .max = kGiB, .reload = Reload::NewClients,
     .summary = "largest rx arena a client may ask for", .access = number<&Config::max_rx_arena_bytes>()},
    {.name = "sq-entries", .section = kSegment, .kind = ValueKind::Number, .unit = Unit::Entries, .value_name = "N",
     .min = kRingMin, .max = kRingMax, .power_of_two = true, .reload = Reload::NewClients,
     .summary = "default submission ring entries", .access = number<&Config::sq_entries>()},
    {.name = "cq-entries", .section = kSegment, .kind = ValueKind::Number, .unit = Unit::Entries, .value_name = "N",
     .min = kRingMin, .max = kRingMax, .power_of_two = true, .reload = Reload::NewClients,
     .summary = "default completion ring entries", .access = number<&Config::cq_entries>()},

    {.name = "max-clients", .section = kQuotas, .kind = ValueKind::Number, .unit = Unit::Count, .value_name = "N",
     .min = 1, .max = 4096, .summary = "most attached clients at once",
     .details = "Each client holds about 4 descriptors in ferryd; at start-up ferryd raises its soft descriptor "
                "limit to cover max-clients (up to the hard limit) or refuses to start, naming both numbers.",
     .access = number<&Config::max_clients>()},
    {.name = "max-clients-per-uid", .section = kQuotas, .kind = ValueKind::Number, .unit = Unit::Count,
     .value_name = "N", .min = 1, .max = 4096, .reload = Reload::NewClients,
     .summary = "most attached clients of one user (uid)",
     .details = "An attach past it is refused with Busy and a log line naming the uid and the quota. Where it is "
                "above max-clients, max-clients binds.",
     .access = number<&Config::max_clients_per_uid>()},
    {.name = "max-endpoints-per-client", .section = kQuotas, .kind = ValueKind::Number, .unit = Unit::Count,
     .value_name = "N", .min = 1, .max = 65536, .reload = Reload::NewClients,
     .summary = "most endpoints one client may have open (local and remote Opens together)",
     .details = "An Open past it completes NoMemory, logged once per client. Each endpoint costs the daemon "
                "about 1 KB of heap (4096 endpoints: 3.4 MB).",
     .access = number<&Config::max_endpoints_per_client>()},
    {.name = "max-memory-bytes", .section = kQuotas, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = 4 * kMiB, .max = 4 * kTiB, .reload = Reload::NewClients,
     .summary = "shared-memory segments of all attached clients together (rings and arenas)",
     .details = "The segments are registered for RDMA and so pinned in memory: size this to what the host can "
                "pin. An attach whose segment would pass it is refused with NoMemory and a log line.",
     .access = number<&Config::max_memory_bytes>()},
    {.name = "max-memory-bytes-per-uid", .section = kQuotas, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = 4 * kMiB, .max = 4 * kTiB, .reload = Reload::NewClients,
     .summary = "shared-memory segments of one user's (uid's) clients together",
     .details = "An attach whose segment would pass it is refused with NoMemory and a log line naming the uid. "
                "Where it is above max-memory-bytes, max-memory-bytes binds.",
     .access = number<&Config::max_memory_bytes_per_uid>()},

    {.name = "control-max-connections", .section = kControl, .kind = ValueKind::Number, .unit = Unit::Count,
     .value_name = "N", .min = 1, .max = 1024, .reload = Reload::Live,
     .summary = "control-socket connections open at once",
     .details = "Past it a new connection is answered with an error and closed. Root, ferryd's own user and "
                "admin-group members have 8 more places, so a flood by other users never locks an administrator "
                "out.",
     .access = number<&Config::control_max_connections>()},
    {.name = "control-idle-timeout-ms", .section = kControl, .kind = ValueKind::Number, .unit = Unit::Millis,
     .value_name = "MS", .min = 100, .max = 3600000, .reload = Reload::Live,
     .summary = "a control connection that makes no progress this long is closed",
     .details = "Progress: a complete request line read, or answer bytes written. A client that holds a partial "
                "line, or stops reading its answers, loses its connection after this.",
     .access = number<&Config::control_idle_timeout_ms>()},
    {.name = "control-output-bytes", .section = kControl, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = 64 * kKiB, .max = 64 * kMiB, .reload = Reload::Live,
     .summary = "answers one control connection may have waiting unsent",
     .details = "Past it ferryd answers no further request of that connection, and reads none, until the client "
                "has read what is waiting: pipelined requests from a client that never reads cost at most this "
                "much memory (plus one answer and one request line).",
     .access = number<&Config::control_output_bytes>()},

    {.name = "max-message-bytes", .section = kTiming, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = 64, .max = shm::kSlabBytes,
     .summary = "largest message, request or response", .access = number<&Config::max_message_bytes>()},
    {.name = "delivery-timeout-ms", .section = kTiming, .kind = ValueKind::Number, .unit = Unit::Millis,
     .value_name = "MS", .min = 1, .max = 3600000,
     .summary = "how long a back-pressured delivery may wait before it fails",
     .access = number<&Config::delivery_timeout_ms>()},
    {.name = "call-timeout-ms", .section = kTiming, .kind = ValueKind::Number, .unit = Unit::Millis,
     .value_name = "MS", .min = 0, .max = shm::kMaxCallTimeoutMs,
     .summary = "how long a call may wait at the server's daemon for its reply; 0 = no limit",
     .details = "Past it the call completes Timeout (its late reply then gets CallerGone), unless the call sets "
                "its own timeout.",
     .access = number<&Config::call_timeout_ms>()},
    {.name = "engine-spin-us", .section = kTiming, .kind = ValueKind::Number, .unit = Unit::Micros,
     .value_name = "US", .min = 0, .max = 100000, .summary = "engine busy-poll time before it sleeps on its eventfd",
     .details = "Higher: lower latency after idle gaps, more CPU.", .access = number<&Config::engine_spin_us>()},
    {.name = "engine-yield-after-us", .section = kTiming, .kind = ValueKind::Number, .unit = Unit::Micros,
     .value_name = "US", .min = 0, .max = 100000,
     .summary = "how long a spinning engine polls before each idle turn also yields the CPU",
     .details = "Lets a process queued behind the spin on the same CPU run. 0: yield every idle turn (best where "
                "more processes spin than there are cores); higher: an engine with a core of its own sees the next "
                "message without a system call in between.",
     .access = number<&Config::engine_yield_after_us>()},
    {.name = "engine-yield-watch", .section = kTiming, .kind = ValueKind::Choice, .choices = "on|off",
     .summary = "time each yield; after one that lost the CPU for 500 us, spin without yielding, then sleep",
     .details = "For hosts whose CPUs ferry's processes share with work that does not block (batch jobs, at any "
                "nice level): a yield hands such a task the CPU for its whole slice while the answer waits. on: a "
                "yield that kept the engine off its CPU for 500 us or more stops the yields for 100 ms; the engine "
                "spins at most engine-spin-us, then sleeps (counters engine_yields_lost, engine_yield_sleeps). "
                "off (the default): on a host that runs only ferry's processes their own turns make some yields "
                "that long, and sleeping then costs latency. Not where engine-spin-hold is in effect.",
     .access = yield_watch_access},
    {.name = "engine-spin-inflight-us", .section = kTiming, .kind = ValueKind::Number, .unit = Unit::Micros,
     .value_name = "US", .min = 0, .max = 100000,
     .summary = "the same while calls or remote operations the engine handled are in flight",
     .details = "Counted from the engine's last turn with work. Spares the round trip the wake-ups of a sleeping "
                "engine; costs CPU only while answers are due, and turns itself off while most answers come later "
                "than it (slow servers; counter spin_skips). Never shorter than engine-spin-us.",
     .access = number<&Config::engine_spin_inflight_us>()},
    {.name = "engine-spin-hold", .section = kTiming, .kind = ValueKind::Choice, .choices = "auto|on|off",
     .summary = "hold the in-flight spin until the answer comes instead of turning it off; auto: on for rxe/siw",
     .details = "on: while answers are due the engine spins (yielding the CPU each idle turn) up to 100 ms "
                "instead of engine-spin-inflight-us, so a call in flight costs no sleep and wake-up. Right where a "
                "wake-up costs more than the spin (software RDMA providers, whose completions are kernel work "
                "on the same CPUs; virtual machines). auto: on when the data lanes run on rxe or siw, off "
                "elsewhere (on hardware the adaptive in-flight spin already catches quick answers). Logged at "
                "start-up.",
     .access = spin_hold_access},
    {.name = "engine-spin-bulk-bytes", .section = kTiming, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = 0, .max = 1u << 30,
     .summary = "where the in-flight spin holds: none while a transfer of this size or more is in flight",
     .details = "A call or send whose request or response buffer is at least this (a rendezvous READ, a reply "
                "WRITTEN into a window) makes the engine sleep after engine-spin-us until nothing is in flight: "
                "on a software RDMA provider the copy work of a large transfer runs on the same CPUs as the "
                "spinning engines (two held spins slowed a 1 MiB call 1.2-3.6x in the Soft-RoCE VM). Applies only "
                "where engine-spin-hold is in effect. 0: never. Logged at start-up.",
     .access = number<&Config::engine_spin_bulk_bytes>()},
    {.name = "engine-clock-stride", .section = kTiming, .kind = ValueKind::Number, .value_name = "TURNS", .min = 0,
     .max = 4096, .summary = "a spinning engine that yields reads the clock once per this many idle turns; 0: auto",
     .details = "Where the clock is a system call (a guest on the HPET or ACPI PM timer: no vDSO clock), every "
                "clock read of a held spin is a syscall beside its yield. auto: 1 when the kernel's clocksource "
                "is read in user space (tsc, kvm-clock, arch_sys_counter, Hyper-V's TSC page), 16 otherwise. "
                "Deadlines are then seen up to that many turns late, never early: a call's timeout counts "
                "from a clock read when its request is taken. Logged at start-up.",
     .access = number<&Config::engine_clock_stride>()},

    {.name = "heartbeat-ms", .section = kChannels, .kind = ValueKind::Number, .unit = Unit::Millis,
     .value_name = "MS", .min = 10, .max = 60000, .summary = "heartbeat interval on the bootstrap connection (a peer heard from needs none)",
     .access = number<&Config::heartbeat_ms>()},
    {.name = "peer-timeout-ms", .section = kChannels, .kind = ValueKind::Number, .unit = Unit::Millis,
     .value_name = "MS", .min = 20, .max = 600000,
     .summary = "silence after which a peer daemon is dead (its operations fail PeerReset)",
     .details = "At least 3 x heartbeat-ms, so that two lost heartbeats do not end a channel.",
     .access = number<&Config::peer_timeout_ms>()},
    {.name = "connect-timeout-ms", .section = kChannels, .kind = ValueKind::Number, .unit = Unit::Millis,
     .value_name = "MS", .min = 1, .max = 60000, .summary = "bound on connecting and handshaking with a peer",
     .access = number<&Config::connect_timeout_ms>()},
    {.name = "max-channels", .section = kChannels, .kind = ValueKind::Number, .unit = Unit::Count,
     .value_name = "N", .min = 0, .max = 1'000'000, .summary = "open peer channels kept at most (0: no cap)",
     .details = "Past it the idlest channel with nothing in flight (no endpoint, nothing unacknowledged) is "
                "closed by agreement with its peer; the next Open to that peer opens a new one. A cap that "
                "every channel's traffic exceeds is not enforced: busy channels are never closed.",
     .access = number<&Config::max_channels>()},
    {.name = "channel-conns", .section = kChannels, .kind = ValueKind::Number, .unit = Unit::Count,
     .value_name = "N", .min = 1, .max = 8, .summary = "data connections per channel",
     .access = number<&Config::channel_conns>()},
    {.name = "peer-max-connections", .section = kChannels, .kind = ValueKind::Number, .unit = Unit::Count,
     .value_name = "N", .min = 1, .max = 1024,
     .summary = "TCP connections to and from peer daemons at once (bootstrap, and data lanes on tcp)",
     .details = "A channel takes 1 of them, plus channel-conns on the tcp transport; accepted connections no "
                "channel has taken never get the last 16. Each is a descriptor (counted in the limit ferryd raises at start-up). An "
                "unused slot costs address space only (about max-message-bytes + 84 KiB, not committed); a "
                "connection's buffers are given back when it closes. On tcp lanes (transport tcp, or auto "
                "without an RDMA device) each has credit-floor receives of receive-pool reserved, so "
                "peer-max-connections x credit-floor must fit in receive-pool, and what is left is all that "
                "busy lanes may borrow: raise receive-pool with it (docs/operations.md).",
     .access = number<&Config::peer_max_connections>()},
    {.name = "peer-hello-timeout-ms", .section = kChannels, .kind = ValueKind::Number, .unit = Unit::Millis,
     .value_name = "MS", .min = 1, .max = 60000,
     .summary = "an accepted peer connection that sends no complete first message within this is closed",
     .details = "Idle connections to the --listen port cannot hold its connection slots; with rdma lanes the "
                "same holds for the connection manager's requests (a connection whose first message does not "
                "come in time is torn down). Refusals and closings are counted (peer_accepts_refused, "
                "peer_accepts_evicted, peer_hello_timeouts) and logged at most once per 10 s.",
     .access = number<&Config::peer_hello_timeout_ms>()},
    {.name = "peer-max-unauthenticated-per-source", .section = kChannels, .kind = ValueKind::Number,
     .unit = Unit::Count, .value_name = "N", .min = 1, .max = 1024,
     .summary = "accepted peer connections from one address that no channel has taken yet",
     .details = "A new one past it replaces that address's oldest silent connection, or is refused. Such "
                "connections never take the 16 slots kept for dials and working channels (rdma: 4 of "
                "rdma-max-connections). The rdma connection manager applies the same cap to its requests.",
     .access = number<&Config::peer_max_unauthenticated_per_source>()},
    {.name = "staging-bytes", .section = kChannels, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = 0, .max = kGiB,
     .summary = "daemon buffer for remote deliveries to a full receiver; past it the sender gets Busy",
     .access = number<&Config::staging_bytes>()},
    {.name = "eager-threshold", .section = kChannels, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = wire::kMinMessageBytes, .max = shm::kSlabBytes,
     .summary = "rdma: largest message sent eagerly (one SEND into a receive slot the peer posted)",
     .details = "Each receive slot of receive-pool (and each of the 64 shared bounce slots) holds this + 48 bytes. Larger messages go by rendezvous (the "
                "receiving daemon RDMA-READs them) and large responses by RDMA WRITE with immediate.",
     .access = number<&Config::eager_threshold>()},
    {.name = "rdma-max-connections", .section = kChannels, .kind = ValueKind::Number, .unit = Unit::Count,
     .value_name = "N", .min = 1, .max = 1024,
     .summary = "rdma: QPs (data lane connections, accepted and dialled) at once",
     .details = "Each costs 16 KiB of registered send memory (128 header slots) and has credit-floor receives "
                "of receive-pool reserved; receive memory does not grow with it. A channel has channel-conns "
                "of them.",
     .access = number<&Config::rdma_max_connections>()},
    {.name = "rdma-ack-timeout", .section = kChannels, .kind = ValueKind::Number, .value_name = "N", .min = 1,
     .max = 31, .summary = "rdma: QP local ACK timeout exponent (4.096 us x 2^N)",
     .details = "14 suits real NICs; 18..20 under Soft-RoCE emulation, which drops and delays.",
     .access = number<&Config::rdma_ack_timeout>()},

    {.name = "receive-pool", .section = kFlow, .kind = ValueKind::Number, .unit = Unit::Count,
     .value_name = "N", .min = 16, .max = 262144,
     .summary = "receive slots every peer lane shares; rdma: the one shared receive queue per device",
     .details = "Receive memory is this x (eager-threshold + 48 bytes, rounded to 64), registered once, "
                "whatever the number of peers (1024 x 8 KiB = 8.3 MiB by default). Each connection the lane "
                "transport holds has credit-floor of it reserved; lanes borrow the rest while busy, up to "
                "credit-share each. On tcp it is the same budget for the same grants (docs/flow-control.md).",
     .access = number<&Config::receive_pool>()},
    {.name = "credit-floor", .section = kFlow, .kind = ValueKind::Number, .unit = Unit::Count,
     .value_name = "N", .min = 2, .max = 65536,
     .summary = "receive credits every peer lane gets when it joins, reserved for it in receive-pool",
     .access = number<&Config::credit_floor>()},
    {.name = "credit-share", .section = kFlow, .kind = ValueKind::Number, .unit = Unit::Count,
     .value_name = "N", .min = 2, .max = 65536,
     .summary = "receive credits one busy peer lane may hold at most (floor plus what it borrows)",
     .details = "A peer that stops consuming holds at most this many of the pool; an idle lane returns what "
                "it borrowed by being granted back less than it used.",
     .access = number<&Config::credit_share>()},
    {.name = "endpoint-window-ops", .section = kFlow, .kind = ValueKind::Number, .unit = Unit::Count,
     .value_name = "N", .min = 0, .max = 65536, .summary = "remote operations in flight per endpoint; 0 = no limit",
     .details = "A remote Send or Call is in flight from the moment this daemon posts it until the peer answers; "
                "past a window it waits here, in order, until room frees or delivery-timeout-ms passes. Per "
                "endpoint, one slow service stalls only its own senders.",
     .access = number<&Config::endpoint_window_ops>()},
    {.name = "channel-window-ops", .section = kFlow, .kind = ValueKind::Number, .unit = Unit::Count,
     .value_name = "N", .min = 0, .max = 65536, .summary = "remote operations in flight per peer channel; 0 = no limit",
     .access = number<&Config::channel_window_ops>()},
    {.name = "channel-window-bytes", .section = kFlow, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = 0, .max = 4 * kGiB,
     .summary = "request bytes in flight per peer channel; 0 = no limit", .access = number<&Config::channel_window_bytes>()},
    {.name = "nic-window-bytes", .section = kFlow, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = 0, .max = 4 * kGiB,
     .summary = "request bytes in flight over every channel of the data transport; 0 = no limit",
     .access = number<&Config::nic_window_bytes>()},
    {.name = "max-reads-inflight", .section = kFlow, .kind = ValueKind::Number, .unit = Unit::Count,
     .value_name = "N", .min = 1, .max = 256,
     .summary = "rdma: rendezvous RDMA READs this daemon has in flight per channel; more wait in arrival order",
     .access = number<&Config::max_reads_inflight>()},
    {.name = "rail-split-bytes", .section = kFlow, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = 0, .max = wire::kMaxPayloadBytes,
     .summary = "rdma, several rails: rendezvous READs of at least this many bytes are split over the rails; 0 = never",
     .details = "The reading daemon posts one chunk per rail that has a live lane of the channel, each landing at its "
                "offset in the destination; chunk sizes follow each rail's measured READ throughput (equal until "
                "measured). Needs the peer's rail keys (RailKeys, docs/rails.md): a READ without them is not split.",
     .access = number<&Config::rail_split_bytes>()},
    {.name = "rdma-windows", .section = kFlow, .kind = ValueKind::Number, .unit = Unit::Count, .value_name = "N",
     .min = 0, .max = 65536,
     .summary = "rdma: memory windows, so a peer gets a key to just the buffer a call exposes; 0 = arena keys",
     .details = "The key covers a response buffer (remote write) or a rendezvous source (remote read) and is "
                "closed when the peer answers. 0: a key to the client's whole tx arena. A device without memory "
                "windows falls back to arena keys with a log line.",
     .access = number<&Config::rdma_windows>()},
    {.name = "rdma-eager-response-bytes", .section = kFlow, .kind = ValueKind::Number, .unit = Unit::Bytes,
     .value_name = "BYTES", .min = 0, .max = 1048576,
     .summary = "rdma: calls whose response buffer is at most this get the reply as a message, no window",
     .details = "Such a reply comes back in a SEND (inline when small) and is copied into the response buffer, "
                "so the call needs no memory-window bind and no key: one SEND each way. Larger response buffers "
                "get a key and the reply is RDMA-WRITTEN into them. Capped at the eager threshold. 0: every "
                "call with a response buffer gets a key.",
     .access = number<&Config::rdma_eager_response_bytes>()},
};
// clang-format on
#pragma GCC diagnostic pop

}  // namespace

std::span<const ConfigKey> config_keys() noexcept { return kKeys; }

const ConfigKey* find_key(std::string_view name) noexcept {
  for (const auto& k : kKeys) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

}  // namespace ferry::daemon
