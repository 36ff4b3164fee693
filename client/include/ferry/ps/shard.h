// One shard of a parameter server: its part of every table and the request
// handler that both transports (ferry calls, framed TCP) share. handle()
// validates a whole request before it changes anything: a bad push applies
// nothing and is answered with an error record (ferry/ps/wire.h).
//
// Not thread safe: one serving thread owns a Shard.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ferry/ps/table.h"
#include "ferry/ps/wire.h"
#include "ferry/visibility.h"

namespace ferry::ps {

namespace detail {
class TableStore;
}

struct ShardSpec {
  std::uint32_t index = 0;
  std::uint32_t shards = 1;
  std::vector<TableSpec> tables;
  std::uint32_t max_count = 4096;  // keys (or elements) per request this shard accepts
  // Create every row this shard owns of each bounded embedding table (rows
  // != 0) at construction, instead of on its first touch: start-up pays
  // for the initial values and the page faults, not the first pulls.
  bool preload = false;
};

struct ShardCounters {
  std::uint64_t requests = 0;
  std::uint64_t rejected = 0;  // answered with an error record
  std::uint64_t pulls = 0;
  std::uint64_t pushes = 0;
  std::uint64_t assigns = 0;
  std::uint64_t keys = 0;  // keys or elements carried by accepted requests
};

class FERRY_API Shard {
 public:
  // Throws std::invalid_argument for a bad spec (configuration time).
  explicit Shard(const ShardSpec& spec);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Handles one request and writes its response into `response`; returns
  // the response's length (0 only when `response` cannot hold an error record).
  [[nodiscard]] std::size_t handle(std::span<const std::byte> request, std::span<std::byte> response) noexcept;

  const ShardSpec& spec() const noexcept { return spec_; }
  const ShardCounters& counters() const noexcept { return counters_; }
  // Largest request / response this shard's tables allow at max_count.
  std::size_t max_request_bytes() const noexcept;
  std::size_t max_response_bytes() const noexcept;
  // A parameter's current values (a row of dim floats, or one dense
  // element), nullptr when this shard never held it. For tests and tools.
  const float* find(TableId table, Key key) const noexcept;

 private:
  FERRY_LOCAL PsStatus run(const Header& h, std::span<const std::byte> request, std::span<std::byte> response,
                           std::size_t* length) noexcept;

  ShardSpec spec_;
  std::vector<std::unique_ptr<detail::TableStore>> stores_;  // by table id; null where none
  ShardCounters counters_;
};

}  // namespace ferry::ps
