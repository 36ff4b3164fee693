// Rules that tie options together, checked with the ranges
// (check_ranges, config.h) and listed in the configuration reference.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "daemon/config/config.h"

namespace ferry::daemon {

struct CrossRule {
  std::string_view keys;  // the options involved, comma-separated (for the reference)
  std::string_view rule;  // the rule as a sentence
  // BadRequest with the reason `c` breaks the rule (with the values), or Ok.
  Error (*check)(const Config& c);
};

std::span<const CrossRule> cross_rules() noexcept;

}  // namespace ferry::daemon
