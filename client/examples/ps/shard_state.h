// One shard's parameters (its rows of the embedding table and its slice of
// the dense blob) and the request handler both transports share. handle()
// validates everything before touching anything: a bad push applies nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ps_protocol.h"

namespace ferry::ps {

struct ShardConfig {
  std::uint32_t index = 0;
  std::uint32_t shards = 1;
  std::uint64_t keys = 0;  // global key space [0, keys)
  std::uint32_t dim = 64;
  std::uint32_t dense = 0;  // floats of the dense blob this shard holds
  float lr = 0.125f;
};

class ShardState {
 public:
  explicit ShardState(const ShardConfig& config);

  // Handles one request and writes the response into `response`; returns
  // its length (always at least a header when response.size() >= 32, else 0).
  std::size_t handle(std::span<const std::byte> request, std::span<std::byte> response) noexcept;

  const ShardConfig& config() const { return config_; }
  std::uint64_t rows() const { return rows_; }
  std::uint64_t requests() const { return requests_; }
  std::uint64_t rejected() const { return rejected_; }

 private:
  PsStatus validate(std::span<const std::byte> request, const MsgHeader& h, std::size_t response_cap) const noexcept;

  ShardConfig config_;
  std::uint64_t rows_ = 0;
  std::vector<float> table_;  // rows_ x dim
  std::vector<float> dense_;
  std::uint64_t requests_ = 0;
  std::uint64_t rejected_ = 0;
};

}  // namespace ferry::ps
