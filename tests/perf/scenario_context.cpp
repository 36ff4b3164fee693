#include "scenario.h"

#include <chrono>

namespace ferry::bench {

std::string_view to_string(Outcome o) noexcept {
  switch (o) {
    case Outcome::Ok: return "Ok";
    case Outcome::Failed: return "Failed";
    case Outcome::NotAvailable: return "NotAvailable";
    case Outcome::BadUsage: return "BadUsage";
  }
  return "Unknown";
}

void ScenarioContext::begin_measured() {
  recorder_.clear();
  verified_ = 0;
  cpu_.begin();
  start_ = SteadyClock::now();
  if (options_.duration_s > 0)
    deadline_ =
        start_ + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(options_.duration_s));
}

void ScenarioContext::end_measured() {
  stop_ = SteadyClock::now();
  cpu_report_ = cpu_.end();
}

double ScenarioContext::elapsed_s() const { return std::chrono::duration<double>(stop_ - start_).count(); }

}  // namespace ferry::bench
