#include "client/src/fork_guard.h"

#include <pthread.h>

namespace ferry::client_detail {

namespace {

void on_fork_child() noexcept { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

void watch_forks() noexcept {
  // A function-local static: registered once, thread-safe; pthread_atfork
  // fails only for want of memory, and then forks go unnoticed as before.
  static const int registered = ::pthread_atfork(nullptr, nullptr, on_fork_child);
  (void)registered;
}

}  // namespace ferry::client_detail
