#include "ps_model.h"

#include <algorithm>
#include <cmath>

namespace ferry::ps::tool {

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
  // guide_[b]: the first rank whose CDF is >= b / kGuide (exact in double).
  guide_.resize(kGuide + 1);
  std::size_t r = 0;
  for (std::size_t b = 0; b < kGuide; ++b) {
    const double edge = static_cast<double>(b) / static_cast<double>(kGuide);
    while (r < cdf_.size() && cdf_[r] < edge) ++r;
    guide_[b] = r;
  }
  guide_[kGuide] = cdf_.size();
}

std::uint64_t ZipfSampler::sample(double u) const {
  // For u in slice b, [b, b+1) / kGuide, the first rank with CDF >= u lies
  // in [guide_[b], guide_[b + 1]]: the same answer as searching everything.
  const double scaled = u * static_cast<double>(kGuide);
  const std::size_t b = !(scaled > 0) ? 0 : std::min(static_cast<std::size_t>(scaled), kGuide - 1);
  const auto first = cdf_.begin() + static_cast<std::ptrdiff_t>(guide_[b]);
  const auto last = cdf_.begin() + static_cast<std::ptrdiff_t>(std::min(guide_[b + 1] + 1, cdf_.size()));
  auto it = std::lower_bound(first, last, u);
  if (it == last) it = std::lower_bound(last, cdf_.end(), u);  // defensive: the slice holds the answer
  if (it == cdf_.end()) return cdf_.size() - 1;
  return static_cast<std::uint64_t>(it - cdf_.begin());
}

}  // namespace ferry::ps::tool
