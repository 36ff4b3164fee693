// Compacting engines (engines/compaction.h): an engine other than 0 offers
// itself to engine 0's thread while the daemon's traffic is light, and
// engine 0 hands it back to its own thread when its thread gets busy.
#include <spdlog/spdlog.h>

#include <bit>
#include <thread>

#include "daemon/engine.h"
#include "ferry/mono_clock.h"

namespace ferry::daemon {

bool Engine::may_compact(std::uint64_t now) const noexcept {
  if (index_ == 0 || loop_.stop || now < compaction_.hold_until_ns) return false;
  const std::uint32_t own = compaction_.window.permille();
  const std::uint32_t host = group_.members[0]->compaction_.window.permille();
  return own < kCompactPermille && own + host < kJoinPermille;
}

void Engine::compact_into_host() {
  Engine& host = *group_.members[0];
  compaction_.baton.hand_over();
  transports_.release_owner();  // the host's thread owns them from its first use
  if (!host.compaction_.inbox.offer(index_)) {
    compaction_.baton.hand_back();  // engine 0 stopped: stay on this thread
    compaction_.hold_until_ns = ~std::uint64_t{0};
    return;
  }
  host.control_.wake();
  compaction_.baton.wait_until_back();
  compaction_.window.restart(mono_ns());
}

void Engine::take_offered() {
  std::uint64_t bits = compaction_.inbox.take();
  while (bits != 0) {
    const auto e = static_cast<std::uint32_t>(std::countr_zero(bits));
    bits &= bits - 1;
    Engine* h = group_.members[e];
    if (!loop_.events.add(h->loop_.events.fd(), kHostedTag | e)) {
      spdlog::warn("engine {}: cannot watch engine {}'s events; it keeps its own thread", index_, e);
      h->compaction_.hold_until_ns = ~std::uint64_t{0};
      h->transports_.release_owner();
      h->compaction_.baton.hand_back();
      continue;
    }
    h->loop_.owner = std::this_thread::get_id();
    h->compaction_.hosted_busy_ns = 0;
    h->compaction_.runner.store(index_, std::memory_order_relaxed);
    bump(h->counters_.engine_compactions);
    spdlog::debug("engine {}: runs engine {} (busy {}/1000, its {}/1000)", index_, e, compaction_.window.permille(),
                  h->compaction_.window.permille());
    hosted_.push_back(h);
  }
}

std::size_t Engine::hosted_turns(std::uint64_t start, std::uint64_t& mark) {
  std::size_t work = 0;
  bool stopping = false;
  for (Engine* h : hosted_) {
    h->dp_.deadlines.start_turn(start);
    const std::size_t w = h->turn();
    stopping = stopping || h->loop_.stop;
    if (w == 0) continue;
    work += w;
    const std::uint64_t now = mono_ns();
    h->loop_.turns.record(now - mark, h->counters_);
    h->compaction_.hosted_busy_ns += now - mark;
    compaction_.window.add(now - mark);
    mark = now;
  }
  if (stopping) {
    // A Stop for a hosted engine: its own thread ends it (engine_loop.cpp).
    for (std::size_t i = 0; i < hosted_.size();) {
      if (hosted_[i]->loop_.stop) {
        hand_back(i, start);
      } else {
        ++i;
      }
    }
  }
  return work;
}

void Engine::close_window(std::uint64_t now) {
  const std::uint32_t busy = compaction_.window.close(now);
  if (hosted_.empty()) return;
  if (busy > kExpandPermille) {
    // The thread is busy: give back the hosted engine that took most of it,
    // if any took a share worth a thread.
    std::size_t best = 0;
    for (std::size_t i = 1; i < hosted_.size(); ++i) {
      if (hosted_[i]->compaction_.hosted_busy_ns > hosted_[best]->compaction_.hosted_busy_ns) best = i;
    }
    const std::size_t own_threads = group_.size() - hosted_.size();
    if (own_threads < group_.max_threads &&
        hosted_[best]->compaction_.hosted_busy_ns * 1000 >= kHandBackMinPermille * kCompactWindowNs) {
      spdlog::debug("engine {}: busy {}/1000 of the last window; engine {} back on its own thread", index_, busy,
                    hosted_[best]->index_);
      hand_back(best, now);
    }
  }
  for (Engine* h : hosted_) h->compaction_.hosted_busy_ns = 0;
}

void Engine::hand_back(std::size_t i, std::uint64_t now) {
  Engine* h = hosted_[i];
  hosted_.erase(hosted_.begin() + static_cast<std::ptrdiff_t>(i));
  loop_.events.remove(h->loop_.events.fd());
  h->transports_.release_owner();
  h->compaction_.hold_until_ns = now + kCompactHoldNs;
  h->compaction_.runner.store(h->index_, std::memory_order_relaxed);
  bump(h->counters_.engine_expansions);
  h->compaction_.baton.hand_back();  // its thread takes over from here
}

void Engine::hand_back_all() {
  const std::uint64_t now = mono_ns();
  while (!hosted_.empty()) hand_back(hosted_.size() - 1, now);
  std::uint64_t offered = compaction_.inbox.close();
  while (offered != 0) {
    Engine* h = group_.members[static_cast<std::uint32_t>(std::countr_zero(offered))];
    offered &= offered - 1;
    h->compaction_.baton.hand_back();
  }
}

Engine* Engine::hosted(std::uint64_t tag) noexcept {
  const auto e = static_cast<std::uint32_t>(tag & ~kHostedTag);
  for (Engine* h : hosted_) {
    if (h->index_ == e) return h;
  }
  return nullptr;
}

void Engine::drain_hosted_events(std::uint64_t tag) {
  Engine* h = hosted(tag);
  if (h == nullptr) return;
  (void)h->loop_.events.wait(0, [h](std::uint64_t t) {
    if (t == kWakeTag) h->control_.drain_wake();
    if (t == kTransportTag) h->compaction_.woke_transports = true;
  });
}

}  // namespace ferry::daemon
