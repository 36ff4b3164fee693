// The key generator's guide table: every sample is the rank a search of the
// whole CDF gives (the keys of a seed must not change: ferry-ps check
// replays them), at slice edges, at both ends and at random points.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ps_model.h"

namespace {

// The CDF built the way the sampler builds it, searched whole.
struct Reference {
  std::vector<double> cdf;
  Reference(std::uint64_t keys, double skew) : cdf(keys) {
    double total = 0;
    for (std::uint64_t r = 0; r < keys; ++r) {
      total += 1.0 / std::pow(static_cast<double>(r + 1), skew);
      cdf[r] = total;
    }
    for (auto& c : cdf) c /= total;
  }
  std::uint64_t sample(double u) const {
    const auto it = std::lower_bound(cdf.begin(), cdf.end(), u);
    return it == cdf.end() ? cdf.size() - 1 : static_cast<std::uint64_t>(it - cdf.begin());
  }
};

}  // namespace

TEST_CASE("zipf: the guided search picks the rank the whole-CDF search picks", "[ps][zipf]") {
  const auto [keys, skew] =
      GENERATE(std::pair<std::uint64_t, double>{1'000'000, 0.99}, std::pair<std::uint64_t, double>{100'000, 1.2},
               std::pair<std::uint64_t, double>{7, 0.5}, std::pair<std::uint64_t, double>{1, 0.99});
  const ferry::ps::tool::ZipfSampler z(keys, skew);
  const Reference ref(keys, skew);
  std::vector<double> us = {0.0, 1e-300, 0.5, 1.0, std::nextafter(1.0, 0.0), 1.5};
  for (std::uint32_t b = 0; b <= 65536; b += 97) {  // slice edges and their neighbours
    const double edge = static_cast<double>(b) / 65536.0;
    us.push_back(edge);
    us.push_back(std::nextafter(edge, 0.0));
    us.push_back(std::nextafter(edge, 2.0));
  }
  for (std::size_t i = 0; i < std::min<std::size_t>(keys, 5000); i += 1 + i / 8) {  // exactly on CDF values
    us.push_back(ref.cdf[i]);
    us.push_back(std::nextafter(ref.cdf[i], 2.0));
  }
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> d(0.0, 1.0);
  for (int i = 0; i < 200'000; ++i) us.push_back(d(rng));
  std::size_t mismatches = 0;
  for (const double u : us) {
    if (z.sample(u) != ref.sample(u)) ++mismatches;
  }
  CHECK(mismatches == 0);
}
