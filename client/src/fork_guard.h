// Fork safety. A child of fork() inherits a copy of every Client: the same
// shared segment, the same rings, the same attach socket. If it used them,
// its submissions and the parent's would race on one ring and its polls
// would steal the parent's completions (the parent then sees entries it
// never submitted and stalls). So a Client remembers the fork generation it
// was attached in, and a child (where pthread_atfork's child handler has
// moved the generation on) finds its inherited clients refusing every call
// with Forked before they touch anything shared.
//
// The check is one relaxed load and a compare on each call: no syscall
// (getpid() is not cached by glibc), no thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace ferry::client_detail {

// Moved on in every child of fork() once watch_forks() has run.
inline std::atomic<std::uint32_t> g_fork_generation{0};

// Registers the child handler (once per process; later calls do nothing).
void watch_forks() noexcept;

inline std::uint32_t fork_generation() noexcept { return g_fork_generation.load(std::memory_order_relaxed); }

}  // namespace ferry::client_detail
