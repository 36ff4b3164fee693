// The one seam between ferry-ps's logic and the wire. A worker owns one
// request buffer and one response buffer per shard; it encodes requests in
// place, and exchange() sends every non-empty request in parallel and waits
// for every response. The response buffer is where the shard's reply lands
// (ferry: the Call's response buffer in the tx arena, written by the daemon;
// tcp: read() from the socket), so rows are used where they arrive.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ferry::ps {

enum class TransportKind : std::uint8_t { Ferry, Tcp };
std::string_view to_string(TransportKind t) noexcept;

class PsTransport {
 public:
  virtual ~PsTransport() = default;
  virtual std::uint32_t shards() const = 0;
  virtual std::span<std::byte> request(std::uint32_t shard) = 0;
  virtual std::span<std::byte> response(std::uint32_t shard) = 0;
  // Sends request(s)[0, request_len[s]) to every shard with request_len[s] > 0
  // and waits for all their responses; response_len[s] gets each length.
  // False with *error set on a transport failure (not on a PsStatus error).
  virtual bool exchange(std::span<const std::uint32_t> request_len, std::span<std::uint32_t> response_len,
                        std::string* error) = 0;
};

struct TransportSpec {
  TransportKind kind = TransportKind::Ferry;
  std::uint32_t shards = 1;
  std::size_t request_bytes = 0;   // capacity of each request buffer
  std::size_t response_bytes = 0;  // capacity of each response buffer
  // ferry
  std::string socket;  // the worker's daemon
  std::string target;  // HOST:PORT of the shards' daemon; empty = local services
  bool busy_poll = false;
  std::string name = "ferry-ps worker";
  // tcp: one HOST:PORT per shard
  std::vector<std::string> shard_addresses;
};

std::unique_ptr<PsTransport> make_ferry_transport(const TransportSpec& spec, std::string* error);
std::unique_ptr<PsTransport> make_tcp_transport(const TransportSpec& spec, std::string* error);
std::unique_ptr<PsTransport> make_transport(const TransportSpec& spec, std::string* error);

// "ps-shard-<i>", and the target a worker opens for it.
std::string shard_service(std::uint32_t shard);
std::string shard_target(const std::string& target, std::uint32_t shard);

}  // namespace ferry::ps
