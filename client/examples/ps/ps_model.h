// The ferry-ps workload model: the gradient a worker pushes and the Zipfian
// key popularity, pure functions of their arguments so the deterministic
// check can recompute the whole run in-process. Initial values are the
// library's "pattern" init (ferry/ps/table.h).
//
// Why the check is exact: initial values are multiples of 1/4 in [-2, 2],
// the gradient is an integer in [-3, 3] (a function of worker, iteration,
// key and column only, never of current values; a worker sums those of a
// key drawn twice in one batch, still an integer) and lr is a power of two,
// so every update lr*g and every partial sum is a multiple of
// q = min(1/4, lr). While |value| < 2^24 * q (checked by exact_bound_ok),
// every such multiple is a float and every float addition is exact, hence
// the result is the same in any order and grouping of application: the
// shards' final parameters must equal the sequential reference bit for bit.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace ferry::ps::tool {

// Gradient worker w pushes at iteration it for column j of key: an integer
// in [-3, 3]. Cheap on purpose: the benchmark measures transport, not math.
inline float gradient(std::uint32_t w, std::uint32_t it, std::uint64_t key, std::uint32_t j) {
  const std::uint64_t h = w * 131u + it * 31u + key * 7u + j;
  return static_cast<float>(static_cast<int>(h % 7) - 3);
}

// Dense table: element e (shard s holds [s * dense, (s + 1) * dense)).
inline float dense_gradient(std::uint32_t w, std::uint32_t it, std::uint64_t element) {
  return static_cast<float>(static_cast<int>((w * 17u + it * 5u + element) % 5) - 2);
}

// True when lr is 2^-k with 0 <= k <= 30.
bool lr_is_power_of_two(double lr);
// True when no parameter can leave the exactly-representable range (see above).
bool exact_bound_ok(double lr, std::uint64_t updates_per_param_max);

// Zipf(s) over ranks 0..keys-1 by inverse CDF; rank r is key r (the
// placement hash spreads the hot ranks over every shard). Set-up allocates the CDF and a
// guide table (for each of kGuide equal slices of [0, 1), the first rank
// whose CDF reaches the slice), so a sample searches only its slice's ranks,
// not the whole CDF: the same key as a search of the whole CDF, without a
// cache miss per step over megabytes (it was a fifth of the benchmark's CPU).
class ZipfSampler {
 public:
  ZipfSampler(std::uint64_t keys, double skew);
  template <typename Rng>
  std::uint64_t operator()(Rng& rng) const {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    return sample(u);
  }
  std::uint64_t sample(double u) const;

 private:
  static constexpr std::size_t kGuide = std::size_t{1} << 16;  // a power of two: u * kGuide is exact
  std::vector<double> cdf_;
  std::vector<std::size_t> guide_;  // kGuide + 1 entries; guide_[kGuide] = keys
};

// The key stream of worker w: seeded so it depends only on (seed, w).
inline std::mt19937_64 worker_rng(std::uint64_t seed, std::uint32_t w) {
  return std::mt19937_64(seed * 0x9E3779B97F4A7C15ull + w + 1);
}

}  // namespace ferry::ps::tool
