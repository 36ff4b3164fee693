// A worker's training loop, transport-agnostic: each iteration draws a
// Zipfian batch of keys, pulls their rows from the shards that own them
// (all shards in parallel), computes gradients and pushes them back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "latency_stats.h"
#include "ps_model.h"
#include "ps_protocol.h"
#include "ps_transport.h"

namespace ferry::ps {

struct Workload {
  std::uint32_t shards = 2;
  std::uint64_t keys = 100000;
  std::uint32_t dim = 64;
  std::uint32_t batch = 512;
  double skew = 0.99;
  std::uint32_t dense = 0;  // dense floats per shard, pulled and pushed every iteration when > 0
  std::uint64_t seed = 1;
};

// Sizes a worker's transport buffers must have for this workload.
std::size_t worker_request_bytes(const Workload& w);
std::size_t worker_response_bytes(const Workload& w);

// Encodes a pull request for `count` keys (already written after the
// header) and returns its length.
std::uint32_t encode_pull_header(std::span<std::byte> msg, std::uint32_t count, std::uint32_t dim,
                                 std::uint32_t dense_offset, std::uint32_t dense_count, std::uint64_t request_id);

class PsWorker {
 public:
  PsWorker(PsTransport& transport, const Workload& workload, std::uint32_t worker_id);

  // One iteration (iteration number `it` feeds the gradients). Records the
  // pull and push latencies when recorders are given. False on any failure.
  bool iterate(std::uint32_t it, bench::LatencyRecorder* pulls, bench::LatencyRecorder* pushes, std::string* error);

  // Test-only fault injection: skip the push of iteration `it`.
  void skip_push_at(std::uint32_t it) { skip_push_ = it; }

  double checksum() const { return checksum_; }
  std::uint64_t keys_pulled() const { return keys_pulled_; }

 private:
  bool check(PsOp op, std::string* error);

  PsTransport& t_;
  Workload w_;
  std::uint32_t id_;
  ZipfSampler zipf_;
  std::mt19937_64 rng_;
  std::vector<std::uint32_t> count_;
  std::vector<std::uint32_t> request_len_;
  std::vector<std::uint32_t> response_len_;
  std::uint64_t next_id_ = 1;
  std::vector<std::uint64_t> ids_;
  double checksum_ = 0;
  std::uint64_t keys_pulled_ = 0;
  std::uint32_t skip_push_ = UINT32_MAX;
};

}  // namespace ferry::ps
