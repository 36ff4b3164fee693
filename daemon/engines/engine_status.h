// The engines as operators see them (ferryctl status --json "engines",
// ferryctl top, the metrics' engine label): per engine its CPU, clients,
// lanes, messages per second, the share of the last second it spent in
// turns that did work, and the messages it handed to and took from other
// engines. Rates come from samples the control thread takes once a second.
// Control thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "base/json.h"
#include "daemon/engines/engine_set.h"

namespace ferry::daemon {

class EngineRates {
 public:
  explicit EngineRates(const EngineSet& engines);

  // Takes a sample (the control thread's timer, about once a second).
  void sample();
  // The "engines" array; `peers`: every engine's channels (their lanes).
  json::Value json(const std::vector<peer::PeerInfo>& peers) const;

 private:
  struct Sample {
    std::uint64_t msgs = 0;
    std::uint64_t busy_ns = 0;
  };
  static Sample read_engine(const EngineSet& set, std::uint32_t e) noexcept;

  const EngineSet& engines_;
  std::chrono::steady_clock::time_point last_at_;
  std::vector<Sample> last_;
  std::vector<double> msgs_per_s_;
  std::vector<double> busy_fraction_;
};

// Messages an engine moved: client ops it completed plus peers' messages it delivered.
std::uint64_t engine_messages(const Counters& c) noexcept;

}  // namespace ferry::daemon
