// How many engines ferryd runs and where: `--engines auto` sized from the
// CPUs ferryd may use, `--engine-cpus` parsed and applied. Start-up only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/error.h"

namespace ferry::daemon {

inline constexpr std::uint32_t kMaxEngines = 64;

// "2,3,8-11" -> {2,3,8,9,10,11}. BadRequest naming the bad item, or Ok.
// Empty text: an empty list.
[[nodiscard]] Error parse_cpu_list(std::string_view text, std::vector<int>& out);

// The CPUs in this process's affinity mask (sched_getaffinity).
std::vector<int> allowed_cpus();

// auto: one engine per four CPUs ferryd may run on, at least one, at most
// kMaxEngines. A quarter leaves the rest of the host to the processes the
// engines serve (trainers, shard servers): an engine that busy-polls while
// its clients are busy costs them a core.
std::uint32_t engines_for_cpus(std::size_t cpus) noexcept;

// The engine count and each engine's CPU (-1: not pinned) from the
// configuration. An error when a listed CPU is not one ferryd may run on.
// `threads`: engine-threads (0: auto, as many as auto engines would be,
// at most the engines; engines/compaction.h).
struct EnginePlan {
  std::uint32_t engines = 1;
  std::uint32_t threads = 1;  // most engines on threads of their own at once
  bool compact = true;        // engine-compact (engines/compaction.h)
  std::vector<int> cpus;      // one per engine
};
[[nodiscard]] Error plan_engines(std::uint32_t configured, std::uint32_t threads, std::string_view cpu_list,
                                 EnginePlan& out);
// engine-compact left at its default: on, unless FERRYD_ENGINE_COMPACT=off
// (test runs use it, beside FERRYD_ENGINES, to run every engine of every
// ferryd they start on its own thread).
bool compact_by_default() noexcept;

// Pins the calling thread to `cpu` (no-op for -1). NotSupported with the
// system's reason when it cannot, or Ok.
[[nodiscard]] Error pin_this_thread(int cpu);

}  // namespace ferry::daemon
