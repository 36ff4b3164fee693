// Per-operation latency samples and the summary ferry-bench reports.
// Samples go into an array preallocated before the measured phase so that
// recording costs one store; percentiles are exact (nearest rank on the
// sorted samples), never estimated from histograms.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ferry::bench {

using SteadyClock = std::chrono::steady_clock;

class LatencyRecorder {
 public:
  explicit LatencyRecorder(std::size_t capacity) { samples_ns_.reserve(capacity); }

  // False when the preallocated array is full (the run should stop).
  bool record(SteadyClock::duration d) noexcept {
    if (samples_ns_.size() == samples_ns_.capacity()) return false;
    samples_ns_.push_back(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()));
    return true;
  }
  bool full() const noexcept { return samples_ns_.size() == samples_ns_.capacity(); }
  std::size_t count() const noexcept { return samples_ns_.size(); }
  void clear() noexcept { samples_ns_.clear(); }
  std::vector<std::uint64_t>& samples() noexcept { return samples_ns_; }

 private:
  std::vector<std::uint64_t> samples_ns_;
};

struct LatencySummary {
  std::uint64_t samples = 0;
  double mean_us = 0;
  double min_us = 0;
  double p50_us = 0;
  double p99_us = 0;
  double p999_us = 0;
  double max_us = 0;
};

// Sorts the samples in place and summarises them.
LatencySummary summarize(std::vector<std::uint64_t>& samples_ns);

// Nearest-rank percentile of sorted samples (q in [0,1]); 0 when empty.
std::uint64_t percentile_sorted(const std::vector<std::uint64_t>& sorted_ns, double q);

}  // namespace ferry::bench
