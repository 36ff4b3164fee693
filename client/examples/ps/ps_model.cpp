#include "ps_model.h"

#include <algorithm>
#include <cmath>

namespace ferry::ps {

bool lr_is_power_of_two(double lr) {
  for (int k = 0; k <= 30; ++k)
    if (lr == std::ldexp(1.0, -k)) return true;
  return false;
}

bool exact_bound_ok(double lr, std::uint64_t updates_per_param_max) {
  const double q = std::min(0.25, lr);
  const double bound = 2.0 + 4.0 * lr * static_cast<double>(updates_per_param_max);  // |init| + |lr*g| * n
  return bound < std::ldexp(q, 24);
}

ZipfSampler::ZipfSampler(std::uint64_t keys, double skew) : cdf_(keys) {
  double total = 0;
  for (std::uint64_t r = 0; r < keys; ++r) {
    total += 1.0 / std::pow(static_cast<double>(r + 1), skew);
    cdf_[r] = total;
  }
  for (auto& c : cdf_) c /= total;
}

std::uint64_t ZipfSampler::sample(double u) const {
  const auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u);
  if (it == cdf_.end()) return cdf_.size() - 1;
  return static_cast<std::uint64_t>(it - cdf_.begin());
}

}  // namespace ferry::ps
