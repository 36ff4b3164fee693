// A ferry-ps worker's iteration, over the parameter-server library: draw a
// Zipfian batch of keys, pull their rows (and the dense table, with
// --dense) from every shard at once, compute the model's gradients for the
// rows where they landed, push them back.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ferry/error.h"
#include "ferry/ps/worker.h"
#include "latency_stats.h"
#include "ps_model.h"
#include "ps_workload.h"

namespace ferry::ps::tool {

class BenchWorker {
 public:
  BenchWorker(Worker& worker, const Workload& workload, std::uint32_t worker_id);

  // One iteration (`it` feeds the gradients). Records the pull and push
  // latencies when recorders are given, each plus `late`: how long after
  // its intended start the iteration began (open loop, --rate). Fails with
  // the failed operation's status (Timeout when it was still in flight at
  // the deadline).
  Error iterate(std::uint32_t it, bench::LatencyRecorder* pulls, bench::LatencyRecorder* pushes,
                std::chrono::nanoseconds late = std::chrono::nanoseconds{0});

  // Test-only fault injection: skip the push of iteration `it`.
  void skip_push_at(std::uint32_t it) { skip_push_ = it; }

  double checksum() const { return checksum_; }
  std::uint64_t keys_pulled() const { return keys_pulled_; }

 private:
  Error finish(Ticket t, const char* what);

  Worker& w_;
  Workload load_;
  std::uint32_t id_;
  ZipfSampler zipf_;
  std::mt19937_64 rng_;
  std::vector<Key> keys_;
  std::vector<float> grads_;
  std::vector<float> dense_grads_;
  double checksum_ = 0;
  std::uint64_t keys_pulled_ = 0;
  std::uint32_t skip_push_ = UINT32_MAX;
};

// What a failed operation says: its status, and the shard and its refusal.
std::string describe_failure(const Worker& w, Ticket t, const char* what);

}  // namespace ferry::ps::tool
