// The engines of one ferryd as the control thread sees them: made at
// start-up (each with its transports, counters and port), joined by their
// rings, run on their threads (pinned with --engine-cpus), and the place
// where attaching clients are put: on the engine they ask for, else on the
// one with the fewest clients. A client stays on its engine until it
// detaches. Control thread only (the engines run on their own threads).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/counters.h"
#include "daemon/engine.h"
#include "daemon/engines/engine_cpus.h"
#include "daemon/engines/engine_group.h"

namespace ferry::daemon {

// AttachRequest::engine: any engine (the least loaded).
inline constexpr std::uint32_t kAnyEngine = 0;

class EngineSet {
 public:
  // Start-up only; throws std::runtime_error when an engine cannot be made.
  EngineSet(const Config& config, const EnginePlan& plan, std::uint64_t token_key, std::uint64_t epoch);
  ~EngineSet();
  EngineSet(const EngineSet&) = delete;
  EngineSet& operator=(const EngineSet&) = delete;

  std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(engines_.size()); }
  Engine& engine(std::uint32_t i) noexcept { return *engines_[i]; }
  const Engine& engine(std::uint32_t i) const noexcept { return *engines_[i]; }
  const Counters& counters(std::uint32_t i) const noexcept { return *counters_[i]; }
  int cpu(std::uint32_t i) const noexcept { return cpus_[i]; }
  std::uint32_t clients(std::uint32_t i) const noexcept { return clients_[i]; }

  // Starts every engine thread (each pins itself first).
  void start();
  // Asks every engine to stop and waits for its thread.
  void stop();

  // Where a client that asked for `asked` (kAnyEngine, or engine index + 1)
  // goes: nullopt when it asked for an engine this ferryd does not run.
  [[nodiscard]] std::optional<std::uint32_t> place(std::uint32_t asked) const noexcept;
  void placed(std::uint32_t e) noexcept { ++clients_[e]; }
  void left(std::uint32_t e) noexcept {
    if (clients_[e] != 0) --clients_[e];
  }

  // Every engine's counters summed (maxima where a counter is a maximum).
  void total(Counters& out) const noexcept;
  // Every engine's channels (status, ferryctl peers).
  std::vector<peer::PeerInfo> peers_snapshot() const;

 private:
  std::unique_ptr<EngineGroup> group_;
  std::vector<std::unique_ptr<Counters>> counters_;
  std::vector<std::unique_ptr<Engine>> engines_;
  std::vector<int> cpus_;
  std::vector<std::uint32_t> clients_;
  std::vector<std::thread> threads_;
};

}  // namespace ferry::daemon
