// The engine loop. One turn asks each component for its work (engine.h);
// when turns find nothing to do for the spin budget (spin_policy.h), the
// engine sleeps on its event set until a doorbell, a transport, a command
// or the next deadline.
#include <sched.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string>

#include "daemon/engine.h"
#include "daemon/loop/spin_clock.h"
#include "daemon/loop/spin_policy.h"
#include "daemon/loop/yield_watch.h"
#include "ferry/mono_clock.h"
#include "ferry_config.h"

namespace ferry::daemon {

std::size_t Engine::turn() {
  // Each step is asked only when it may have work (an inline check): an
  // idle component costs a load, not a call (docs/benchmarks/engines.md).
  std::size_t work = control_.commands_waiting() ? drain_commands() : 0;
  if (!dp_.forwarder.link().single()) work += poll_cross();  // other engines: ops to run here, completions
  work += poll_peers();                                      // peer daemons: handshakes, heartbeats, traffic
  work += poll_submissions();
  if (!dp_.parking.empty()) work += dp_.parking.retry();
  if (dp_.proxy.staging()) work += dp_.proxy.retry_staged();
  if (dp_.remote.keys_pending()) work += dp_.remote.poll_keys();  // keys bound or closed: requests go, ops end
  if (dp_.deadlines.due()) work += expire();
  dp_.sessions.flush();
  if (dp_.sessions.any_doomed()) reap_doomed();
  if (control_.events_waiting()) control_.flush_events();
  if (!dp_.forwarder.link().single()) work += dp_.forwarder.link().flush();  // and wakes the engines sent to
  return work;
}

std::size_t Engine::poll_cross() {
  CrossLink& link = dp_.forwarder.link();
  if (link.single()) return 0;
  std::size_t n = link.flush();  // spilled messages first: they are older
  n += link.poll([this](std::uint32_t from, const CrossMsg& m) { dp_.on_cross(from, m); });
  cross_in_.store(link.received(), std::memory_order_relaxed);
  cross_out_.store(link.sent(), std::memory_order_relaxed);
  return n;
}

bool Engine::answers_due() const noexcept {
  return dp_.calls.size() != 0 || dp_.remote.inflight() != 0 || dp_.calls.replier().size() != 0;
}

bool Engine::bulk_inflight() const noexcept {
  return dp_.remote.exposed_inflight() != 0 || dp_.proxy.reads_inflight() != 0;
}

void Engine::run() {
  loop_.owner = std::this_thread::get_id();
  const bool hold = config_.engine_spin_hold == SpinHold::On ||
                    (config_.engine_spin_hold == SpinHold::Auto && transports_.software_rdma);
  SpinPolicy spin(config_.engine_spin_us, config_.engine_spin_inflight_us, hold);
  // Large transfers change the spin only where it holds (spin_policy.h).
  const bool large_sleeps = hold && config_.engine_spin_bulk_bytes != 0;
  const std::string clocksource = current_clocksource();
  SpinClock clock(config_.engine_clock_stride != 0 ? config_.engine_clock_stride : auto_clock_stride(clocksource));
  spdlog::info("engine: spin {} us idle, yielding after {} us; in flight {} (engine-spin-hold {}{}); {}",
               config_.engine_spin_us, config_.engine_yield_after_us,
               hold ? "held until the answer (up to 100 ms; adaptive during bulk transfers)"
                    : std::to_string(spin.budget_ns(true, true) / 1000) + " us, adaptive",
               to_string(config_.engine_spin_hold),
               config_.engine_spin_hold != SpinHold::Auto ? ""
               : transports_.software_rdma                ? ": software RDMA provider"
                                                          : ": hardware or tcp lanes",
               large_sleeps ? "no in-flight spin while a transfer of " +
                                  std::to_string(config_.engine_spin_bulk_bytes) + " bytes or more is in flight"
                            : std::string("engine-spin-bulk-bytes not in effect"));
  spdlog::info("engine: clock read once per {} idle turn(s) while yielding (engine-clock-stride {}{}{})",
               clock.stride(), config_.engine_clock_stride, config_.engine_clock_stride != 0 ? "" : ": clocksource ",
               config_.engine_clock_stride != 0 ? "" : (clocksource.empty() ? "unknown" : clocksource));
  if (config_.engine_yield_watch) {
    spdlog::info("engine: engine-yield-watch on: a yield that loses the CPU for {} us stops the yields for {} ms{}",
                 YieldWatch::kLongNs / 1000, YieldWatch::kHoldNs / 1000000,
                 hold ? " (not in effect: engine-spin-hold holds the spin)" : "");
  }
  const std::uint64_t yield_after_ns = std::uint64_t{config_.engine_yield_after_us} * 1000;
  std::uint64_t idle_since = mono_ns();
  bool after_work = false;  // the idle period began with a turn that did work
  // The stretch awaits answers (SpinPolicy::awaits_answers): since when.
  bool awaiting = false;
  std::uint64_t awaiting_since = 0;
  std::uint64_t busy_since = 0;  // start of the last turn, when it did work
  bool yielding = false;         // the last turn was idle and yielded
  // A large transfer started since nothing was last in flight.
  std::uint64_t large_seen = 0;
  bool large = false;
  bool spin_slot = false;  // held from the first idle turn to the next sleep (engines/spin_slots.h)
  // engine-yield-watch: where yields hand the CPU to a long-running task
  // the engine stops yielding for a while: it spins at most engine-spin-us,
  // then sleeps (loop/yield_watch.h). Not where the spin holds: there the
  // yield runs the software RDMA provider's own work, which is what the
  // engine waits for.
  YieldWatch yields;
  const bool watch_yields = config_.engine_yield_watch && !spin.holds();
  const std::uint64_t idle_spin_ns = std::uint64_t{config_.engine_spin_us} * 1000;
  const bool compact = compacting();
  compaction_.window.restart(idle_since);
  while (!loop_.stop) {
    const std::uint64_t start = clock.now(yielding);
    if (yielding && yields.after_yield(start)) bump(counters_.engine_yields_lost);
    yielding = false;
    if (busy_since != 0) record_busy(start - busy_since);
    dp_.deadlines.start_turn(start);
    std::size_t work = turn();
    if (compact) {
      if (compaction_.inbox.pending()) take_offered();
      if (!hosted_.empty()) {
        // Each engine's busy turn is timed on its own (engines/compaction.h).
        std::uint64_t mark = start;
        if (work != 0) {
          mark = mono_ns();
          record_busy(mark - start);
        }
        work += hosted_turns(start, mark);
        busy_since = 0;
      } else {
        busy_since = work != 0 ? start : 0;
      }
      if (compaction_.window.closes(start)) close_window(start);
    } else {
      busy_since = work != 0 ? start : 0;
    }
    if (work != 0) {
      if (awaiting) spin.record_wait(start - awaiting_since);
      awaiting = false;
      idle_since = start;
      after_work = true;
      continue;
    }
    bool due = answers_due();
    for (const Engine* h : hosted_) due = due || h->answers_due();
    const bool awaits = SpinPolicy::awaits_answers(after_work, due);
    if (awaits && !awaiting) {
      awaiting = true;  // until work comes, through any sleeps
      awaiting_since = idle_since;
    }
    Transfer t = Transfer::Small;
    if (spin.holds()) {
      bool bulk = bulk_inflight();
      std::uint64_t started = dp_.remote.large_started() + dp_.proxy.large_started();
      for (const Engine* h : hosted_) {
        bulk = bulk || h->bulk_inflight();
        started += h->dp_.remote.large_started() + h->dp_.proxy.large_started();
      }
      if (large_sleeps) {
        if (started != large_seen) large = true;
        large_seen = started;
      }
      // Until nothing is in flight: a server's daemon READs the request
      // before the call is due, then waits for the server and its reply.
      if (!due && !bulk) large = false;
      t = large ? Transfer::Large : bulk ? Transfer::Bulk : Transfer::Small;
    }
    bool spent = start - idle_since >= spin.budget_ns(after_work, due, t);
    const bool yield_due = start - idle_since >= yield_after_ns;
    const bool unyielding = !spent && yield_due && watch_yields && yields.hold(start);
    const bool no_yield = unyielding && start - idle_since >= idle_spin_ns;
    if (no_yield) spent = true;  // sleep: a yield would run a long-running task, and the short spin is over
    if (!spent && !spin_slot) spin_slot = group_.spin_slots.take();
    if (spent || !spin_slot) {
      if (no_yield) bump(counters_.engine_yield_sleeps);
      if (awaits && !no_yield && spin.skipped(t)) bump(counters_.spin_skips);
      if (awaits && t == Transfer::Large) bump(counters_.spin_large_sleeps);
      if (!spent) bump(counters_.spin_slot_sleeps);
      if (spin_slot) group_.spin_slots.give();
      spin_slot = false;
      if (compact && may_compact(start)) {
        compact_into_host();  // engine 0's thread runs this one until it hands it back
        loop_.owner = std::this_thread::get_id();
        awaiting = false;
        busy_since = 0;
      } else {
        sleep_until_work();
      }
      idle_since = mono_ns();
      after_work = false;
    } else if (yield_due && !unyielding) {
      // Spinning. The work we wait for is usually another process's turn
      // (a client answering, the peer's server replying); where processes
      // outnumber cores it may be runnable on this very CPU, queued behind
      // the spin. Once idle for engine-yield-after-us, yield so it runs now.
      // Not sooner: a yield is a system call, and an engine that yields every
      // idle turn sees a busy client's next message a syscall late
      // (ipc-echo --busy-poll 64 B p50 on an idle 2-core VM: 1.2-1.4 us
      // yielding every turn, 0.41-0.60 us after 2 us; with two CPU hogs
      // 4.5 against 5.8 us: docs/benchmarks/fast-path.md).
      if (watch_yields) yields.yielding(start);
      ::sched_yield();
      yielding = true;  // the next turn may reuse this clock reading (spin_clock.h)
    }
  }
  if (compact && index_ == 0) hand_back_all();  // their threads see their Stop and end as below
  if (spin_slot) group_.spin_slots.give();
  // Stop: detach everyone so sessions unmap in an orderly way, then say
  // Goodbye to every peer.
  while (!dp_.sessions.empty()) detach(dp_.sessions.all().back()->id());
  dp_.peers->close_all();
  for (int i = 0; i < 8; ++i) (void)dp_.peers->poll(mono_ns());  // lets the Goodbyes and closes go out
}

std::size_t Engine::drain_commands() {
  std::size_t n = 0;
  EngineCommand cmd;
  while (control_.next_command(cmd)) {
    ++n;
    switch (cmd.kind) {
      case EngineCommand::Kind::Attach: adopt(cmd.session); break;
      case EngineCommand::Kind::Detach: detach(cmd.client_id); break;
      case EngineCommand::Kind::Stop: loop_.stop = true; break;
    }
  }
  return n;
}

std::size_t Engine::poll_submissions() {
  if constexpr (FERRY_DEBUG_CHECKS) {
    if (std::this_thread::get_id() != loop_.owner) {
      spdlog::critical("engine object touched off the engine thread");
      std::abort();
    }
  }
  return dp_.poll_submissions();
}

std::size_t Engine::expire() { return dp_.expire(); }

void Engine::reap_doomed() {
  dp_.sessions.doomed_reaped();
  for (std::size_t i = 0; i < dp_.sessions.all().size();) {
    ClientSession* c = dp_.sessions.all()[i];
    if (c->doomed) {
      const std::uint32_t id = c->id();
      detach(id);  // takes it out of all()
      control_.client_thrown_out(id);
    } else {
      ++i;
    }
  }
}

void Engine::record_busy(std::uint64_t ns) noexcept {
  loop_.turns.record(ns, counters_);
  compaction_.window.add(ns);
}

bool Engine::announce_sleep(int& timeout_ms) {
  // Dekker handshake per client (ring.h): announce, then re-check.
  bool all_idle = dp_.peers->prepare_to_sleep();
  for (ClientSession* c : dp_.sessions.all()) {
    if (!c->sq.prepare_to_sleep()) all_idle = false;
  }
  CrossLink& cross = dp_.forwarder.link();
  if (!cross.single() && (cross.spilling() || !cross.prepare_to_sleep())) all_idle = false;
  if (!all_idle || control_.commands_waiting()) return false;
  // Waiting deliveries and CQ overflows wait for room that frees without
  // a doorbell (the client reading its CQ), so they need a periodic look.
  // So do keys being bound or closed (their completions wake nobody).
  const bool pending = !dp_.parking.empty() || control_.events_waiting() || dp_.proxy.staging() ||
                       dp_.peers->holding() || dp_.sessions.any_overflow() || dp_.remote.keys_pending();
  // Channels need their heartbeats and deadlines looked at even when quiet.
  timeout_ms = pending ? kBusyPollMs : dp_.peers->channel_count() != 0 ? kPeerTickMs : -1;
  const int deadline = dp_.deadlines.ms_until_due(mono_ns());
  if (deadline >= 0 && (timeout_ms < 0 || deadline < timeout_ms)) timeout_ms = deadline;
  return true;
}

void Engine::end_sleep(bool slept, bool transports, bool timed_out) {
  if (slept) dp_.peers->woke(transports || timed_out);
  for (ClientSession* c : dp_.sessions.all()) c->sq.woke_up();
  if (CrossLink& cross = dp_.forwarder.link(); !cross.single()) cross.woke_up();
}

void Engine::sleep_until_work() {
  int timeout = -1;
  bool idle = announce_sleep(timeout);
  // A host sleeps for the engines it runs too: each announces its sleep,
  // and the host's set watches theirs (engines/compaction.h).
  for (Engine* h : hosted_) {
    int t = -1;
    if (!h->announce_sleep(t)) {
      idle = false;
    } else if (t >= 0 && (timeout < 0 || t < timeout)) {
      timeout = t;
    }
  }
  if (compaction_.inbox.pending()) idle = false;
  bool transports = false;
  int n = 0;
  if (idle) {
    bump(counters_.engine_sleeps);
    for (Engine* h : hosted_) bump(h->counters_.engine_sleeps);
    n = loop_.events.wait(timeout, [&](std::uint64_t tag) {
      // The wake fd is ours: drained. A client's SQ doorbell is never read
      // (engine.cpp adopt): the wake itself is the news. Transports and
      // connects are level-triggered: the next turn's poll consumes them.
      if (tag == kWakeTag) control_.drain_wake();
      if (tag == kTransportTag) transports = true;
      if ((tag & kHostedTag) != 0 && tag != kTransportTag) drain_hosted_events(tag);
    });
  }
  end_sleep(idle, transports, n <= 0);
  for (Engine* h : hosted_) {
    h->end_sleep(idle, h->compaction_.woke_transports, n <= 0);
    h->compaction_.woke_transports = false;
  }
}

}  // namespace ferry::daemon
