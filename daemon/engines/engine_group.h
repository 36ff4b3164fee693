// What the engines of one ferryd share: the service directory, each
// engine's bootstrap port (peers are redirected there) and the rings
// between them. Made before the engine threads start; after that the ports
// never change, the directory locks itself and each ring has one producer
// and one consumer thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "daemon/engines/cross_link.h"
#include "daemon/engines/service_directory.h"
#include "daemon/engines/spin_slots.h"

namespace ferry::daemon {

class Engine;

struct EngineGroup {
  explicit EngineGroup(std::uint32_t engines) : ports(engines, 0), spin_slots(engines) {}
  std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(ports.size()); }

  std::vector<std::uint16_t> ports;  // each engine's bootstrap port (0: not listening)
  ServiceDirectory directory;
  std::unique_ptr<CrossRings> rings;  // null until the engines exist (their wake fds)
  SpinSlots spin_slots;               // engines that may spin at once
  // Every engine, by index (set before the threads start), and whether
  // engine 0's thread may run the others' turns (engines/compaction.h).
  std::vector<Engine*> members;
  bool compact = false;
  std::uint32_t max_threads = 1;  // most engines on threads of their own at once
};

}  // namespace ferry::daemon
