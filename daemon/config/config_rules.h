// Rules that tie options together, checked with the ranges
// (check_ranges, config.h) and listed in the configuration reference.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/config/config.h"

namespace ferry::daemon {

struct CrossRule {
  std::string_view keys;  // the options involved, comma-separated (for the reference)
  std::string_view rule;  // the rule as a sentence
  // BadRequest with the reason `c` breaks the rule (with the values), or Ok.
  Error (*check)(const Config& c);
  // A caution: breaking it is logged at start-up and printed by
  // --check-config, and does not stop the daemon (the configuration serves
  // some uses, and the message says which it cannot).
  bool caution = false;
};

std::span<const CrossRule> cross_rules() noexcept;

// The messages of the cautions `c` breaks, in table order.
[[nodiscard]] std::vector<std::string> config_cautions(const Config& c);

}  // namespace ferry::daemon
