// Range checks from the descriptor table, then the cross-field rules.
#include "daemon/config/config_rules.h"

#include "daemon/config/config_keys.h"
#include "transport/accept_guard.h"
#include "transport/rdma/rdma_config.h"
#include "transport/tcp/tcp_config.h"

namespace ferry::daemon {
namespace {

bool power_of_two(std::uint64_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }

std::string num(std::uint64_t v) { return std::to_string(v); }

// The connections of one channel a daemon accepts before any is vouched for
// (transport/accept_guard.h): its lanes may all arrive before the first
// joins, and on tcp lanes its bootstrap connection is among them.
Error accept_room(const char* slots_key, std::uint32_t slots, std::uint32_t reserve, std::uint32_t need,
                  const Config& c) {
  const std::uint32_t budget = transport::AcceptGuard::unvouched_budget(slots, reserve);
  std::string short_of;
  if (budget < need) {
    short_of = std::string(slots_key) + " " + num(slots) + " keeps " + num(slots - budget) +
               " slots for dials and working channels and admits " + num(budget) +
               " connections not yet taken by a channel";
  } else if (c.peer_max_unauthenticated_per_source < need) {
    short_of = "peer-max-unauthenticated-per-source admits " + num(c.peer_max_unauthenticated_per_source) +
               " connections not yet taken by a channel from one address";
  } else {
    return {};
  }
  return Error::bad_request(short_of + ", and a peer's channel with channel-conns " + num(c.channel_conns) +
                            " brings " + num(need) +
                            " at once: this daemon can dial channels, but no peer could open one here; raise it or "
                            "lower channel-conns");
}

// clang-format off
constexpr CrossRule kRules[] = {
    {"heartbeat-ms, peer-timeout-ms",
     "peer-timeout-ms is at least 3 x heartbeat-ms, so that two lost heartbeats do not end a channel",
     [](const Config& c) -> Error {
       if (std::uint64_t{c.peer_timeout_ms} >= 3ull * c.heartbeat_ms) return {};
       return Error::bad_request(
           "peer-timeout-ms " + num(c.peer_timeout_ms) + " is shorter than 3 x heartbeat-ms (" +
           num(c.heartbeat_ms) + "): every peer would be declared dead between two heartbeats; raise "
           "peer-timeout-ms to at least " + num(3ull * c.heartbeat_ms) + " or lower heartbeat-ms");
     }},
    {"tx-arena-bytes, rx-arena-bytes, max-memory-bytes, max-memory-bytes-per-uid",
     "a client of the default size (tx-arena-bytes + rx-arena-bytes) fits in max-memory-bytes and in "
     "max-memory-bytes-per-uid",
     [](const Config& c) -> Error {
       const std::uint64_t client = c.tx_arena_bytes + c.rx_arena_bytes;
       const bool per_uid = client > c.max_memory_bytes_per_uid;
       if (!per_uid && client <= c.max_memory_bytes) return {};
       return Error::bad_request(
           "tx-arena-bytes + rx-arena-bytes (" + format_size(client) + ") is more than " +
           (per_uid ? "max-memory-bytes-per-uid (" + format_size(c.max_memory_bytes_per_uid)
                    : "max-memory-bytes (" + format_size(c.max_memory_bytes)) +
           "): no client of the default size could attach");
     }},
    {"peer-max-connections, credit-floor, receive-pool",
     "on tcp lanes (transport tcp, or auto, which falls back to tcp) peer-max-connections x credit-floor fits in "
     "receive-pool: every tcp connection has its floor of receive credits reserved",
     [](const Config& c) -> Error {
       // On rdma lanes the tcp connections carry no credits (the rdma
       // transport's connections have the reservation): nothing to check.
       const std::uint64_t need = std::uint64_t{c.peer_max_connections} * c.credit_floor;
       if (c.transport == Transport::Rdma || need <= c.receive_pool) return {};
       return Error::bad_request(
           "peer-max-connections " + num(c.peer_max_connections) + " x credit-floor " + num(c.credit_floor) +
           " = " + num(need) + " receive credits reserved on tcp lanes, more than receive-pool (" +
           num(c.receive_pool) + "): raise receive-pool to at least " + num(need) +
           " (on tcp it is a budget, not memory), lower peer-max-connections or credit-floor, or use "
           "--transport rdma");
     }},
    {"peer-max-connections, rdma-max-connections, peer-max-unauthenticated-per-source, channel-conns",
     "(a caution) a peer's channel can be accepted: on tcp lanes peer-max-connections, less the slots kept for dials, and "
     "peer-max-unauthenticated-per-source admit 1 + channel-conns connections not yet taken by a channel (its "
     "bootstrap and lanes); on rdma lanes rdma-max-connections and the per-source cap admit channel-conns",
     [](const Config& c) -> Error {
       const std::uint32_t k = c.channel_conns;
       if (c.transport != Transport::Rdma) {
         if (Error bad = accept_room("peer-max-connections", c.peer_max_connections,
                                     transport::tcp::TcpConfig{}.reserved_slots, 1 + k, c);
             bad.failed()) {
           return bad;
         }
       }
       if (c.transport == Transport::Tcp) return {};
       return accept_room("rdma-max-connections", c.rdma_max_connections, transport::rdma::RdmaConfig{}.reserved_slots, k, c);
     },
     /*caution=*/true},
};
// clang-format on

}  // namespace

std::span<const CrossRule> cross_rules() noexcept { return kRules; }

Error check_ranges(const Config& c) {
  for (const ConfigKey& k : config_keys()) {
    if (k.kind != ValueKind::Number || k.access.number == nullptr) continue;
    const std::uint64_t v = k.access.number(c);
    std::uint64_t hi = k.max;
    if (!k.max_key.empty()) {
      const ConfigKey* bound = find_key(k.max_key);
      hi = bound != nullptr && bound->access.number != nullptr ? bound->access.number(c) : 0;
    }
    if (v < k.min || v > hi || (k.power_of_two && !power_of_two(v))) {
      std::string why = "invalid value " + value_text(k, c) + ": " + std::string(k.name) + " must be " + range_text(k);
      if (!k.max_key.empty()) why += " (" + std::string(k.max_key) + " is " + format_size(hi) + ")";
      return Error::bad_request(std::move(why));
    }
  }
  for (const CrossRule& r : kRules) {
    if (r.caution) continue;
    if (Error bad = r.check(c); bad.failed()) return bad;
  }
  return {};
}

std::vector<std::string> config_cautions(const Config& c) {
  std::vector<std::string> out;
  for (const CrossRule& r : kRules) {
    if (!r.caution) continue;
    if (Error bad = r.check(c); bad.failed()) out.push_back(bad.message());
  }
  return out;
}

}  // namespace ferry::daemon
