// Asserts that a datapath object is used by one thread only (its owner).
// Binds to the first thread that calls check(), so an object can be
// built on a control thread and handed to its engine thread. Compiles to
// nothing unless the debug_checks option is on.
#pragma once

#include <cassert>
#include <thread>

#include "ferry_config.h"

namespace ferry::transport {

class OwnerThread {
 public:
  void check() noexcept {
    if constexpr (FERRY_DEBUG_CHECKS) {
      if (owner_ == std::thread::id{}) owner_ = std::this_thread::get_id();
      assert(owner_ == std::this_thread::get_id() && "datapath object used off its owner thread");
    }
  }
  // Hands the object to another thread (before that thread's first call).
  void release() noexcept { owner_ = std::thread::id{}; }

 private:
  std::thread::id owner_{};
};

}  // namespace ferry::transport
