#include "latency_stats.h"

#include <algorithm>
#include <cmath>

namespace ferry::bench {

std::uint64_t percentile_sorted(const std::vector<std::uint64_t>& sorted_ns, double q) {
  if (sorted_ns.empty()) return 0;
  // Nearest rank: the smallest sample with at least q of all samples <= it.
  const double rank = std::ceil(q * static_cast<double>(sorted_ns.size()));
  std::size_t index = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  index = std::min(index, sorted_ns.size() - 1);
  return sorted_ns[index];
}

LatencySummary summarize(std::vector<std::uint64_t>& samples_ns) {
  LatencySummary s;
  s.samples = samples_ns.size();
  if (samples_ns.empty()) return s;
  std::sort(samples_ns.begin(), samples_ns.end());
  long double total = 0;
  for (const auto v : samples_ns) total += static_cast<long double>(v);
  constexpr double kNsPerUs = 1000.0;
  s.mean_us = static_cast<double>(total / samples_ns.size()) / kNsPerUs;
  s.min_us = static_cast<double>(samples_ns.front()) / kNsPerUs;
  s.max_us = static_cast<double>(samples_ns.back()) / kNsPerUs;
  s.p50_us = static_cast<double>(percentile_sorted(samples_ns, 0.50)) / kNsPerUs;
  s.p99_us = static_cast<double>(percentile_sorted(samples_ns, 0.99)) / kNsPerUs;
  s.p999_us = static_cast<double>(percentile_sorted(samples_ns, 0.999)) / kNsPerUs;
  return s;
}

}  // namespace ferry::bench
