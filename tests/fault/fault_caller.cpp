#include "tests/fault/fault_caller.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

namespace ferry::fault {

using itest::Clock;
using itest::fail;

namespace {

enum class Phase : std::uint8_t { Running, Draining, Recovered };

struct Slot {
  Buffer req, resp;
  std::uint64_t id = 0;  // op id in flight in this slot; 0: free
  std::uint32_t len = 0;
  Clock::time_point submitted{};
};

long long ms_between(Clock::time_point a, Clock::time_point b) {
  if (a == Clock::time_point{} || b == Clock::time_point{}) return -1;
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

std::string st(Status s) { return std::string(to_string(s)); }

}  // namespace

int run_fault_caller(const FaultCallerSpec& spec) {
  auto c = itest::attach_retry(spec.socket, "fault-caller-" + std::to_string(spec.caller));
  if (!c) return fail(40, "fault-caller %u: attach", spec.caller);
  const auto open_deadline = Clock::now() + spec.open_within;
  auto opened = c->open(spec.target, 5s);
  while (!opened && Clock::now() < open_deadline) {
    Completion none[1];
    c->wait(none, 50ms);  // the server or the channel is not ready yet; nothing is in flight
    opened = c->open(spec.target, 5s);
  }
  if (!opened)
    return fail(41, "fault-caller %u: open %s: %s", spec.caller, spec.target.c_str(), st(opened.status).c_str());
  EndpointId ep = opened.value;
  std::vector<Slot> slots(spec.concurrency);
  for (auto& s : slots) {
    s.req = c->alloc(spec.max_size);
    s.resp = c->alloc(spec.max_size);
    if (!s.req || !s.resp) return fail(42, "fault-caller %u: alloc", spec.caller);
  }
  std::unordered_map<std::uint64_t, std::uint32_t> inflight;  // op id -> slot
  std::map<Status, std::uint64_t> failed_by;
  std::uint64_t next_id = 1, submitted = 0, ok = 0, failed = 0, ok_after = 0, attempts = 0;
  long long max_call_ms = 0;
  Phase phase = Phase::Running;
  bool progressed = false;
  Clock::time_point t_fault{}, t_fail{}, t_ok_after{};
  const auto deadline = Clock::now() + spec.run_within;
  // Whether the parent has injected the fault; notes when it was first seen.
  auto fault_seen = [&] {
    if (spec.fault == nullptr || t_fault != Clock::time_point{}) return true;
    if (!spec.fault->ready()) return false;
    t_fault = Clock::now();
    return true;
  };
  auto allowed = [&](Status s) {
    return spec.expect_fault && std::find(spec.failures.begin(), spec.failures.end(), s) != spec.failures.end();
  };
  // The fault is over and no call failed (fault_optional).
  auto rode_out = [&] {
    return spec.fault_optional && phase == Phase::Running && spec.reopen_after != nullptr && spec.reopen_after->ready();
  };
  auto finished = [&] {
    if (!spec.expect_fault) return spec.stop == nullptr ? ok >= spec.after_recovery : ok_after >= spec.after_recovery;
    return (phase == Phase::Recovered || rode_out()) && ok_after >= spec.after_recovery;
  };
  Completion out[32];
  for (;;) {
    const auto now = Clock::now();
    if (now > deadline)
      return fail(43, "fault-caller %u: not done within %lld ms (phase %d, %zu calls in flight, %llu ok after re-open)",
                  spec.caller, (long long)spec.run_within.count(), static_cast<int>(phase), inflight.size(),
                  (unsigned long long)ok_after);
    if (spec.fault != nullptr) fault_seen();
    const bool done = finished();
    if (done && inflight.empty()) break;
    // Submit while running and not done.
    for (std::uint32_t i = 0; i < slots.size() && phase != Phase::Draining && !done; ++i) {
      Slot& s = slots[i];
      if (s.id != 0) continue;
      const std::uint64_t id = next_id;
      s.len = itest::size_for(id, spec.max_size);
      itest::fill_payload(s.req.data, s.len, spec.caller, id);
      const Status r = c->call(ep, s.req, s.len, s.resp, id);
      if (r == Status::Busy) break;
      if (r != Status::Ok) {
        // Refused at submission: no completion follows, nothing is in flight for it.
        if (!allowed(r) || !fault_seen())
          return fail(44, "fault-caller %u: call refused at submission: %s", spec.caller, st(r).c_str());
        if (t_fail == Clock::time_point{}) t_fail = now;
        phase = Phase::Draining;
        break;
      }
      ++next_id;
      ++submitted;
      s.id = id;
      s.submitted = now;
      inflight.emplace(id, i);
    }
    // A call nobody will ever answer (a frame dropped on the wire).
    if (spec.stuck_after.count() > 0 && phase != Phase::Draining) {
      for (const auto& s : slots) {
        if (s.id == 0 || now - s.submitted < spec.stuck_after) continue;
        if (!allowed(Status::Cancelled))
          return fail(45, "fault-caller %u: call %llu unanswered for %lld ms", spec.caller, (unsigned long long)s.id,
                      (long long)ms_between(s.submitted, now));
        std::fprintf(stderr, "fault-caller %u: call %llu unanswered for %lld ms: closing the endpoint\n", spec.caller,
                     (unsigned long long)s.id, (long long)ms_between(s.submitted, now));
        if (t_fail == Clock::time_point{}) t_fail = now;
        // The fault happened when the lost call was sent: time it from there.
        if (t_fault == Clock::time_point{}) t_fault = s.submitted;
        phase = Phase::Draining;
        const Status cs = c->close(ep);  // its calls complete Cancelled first (kept for poll)
        if (cs != Status::Ok) return fail(46, "fault-caller %u: close: %s", spec.caller, st(cs).c_str());
        ep = 0;
        break;
      }
    }
    const std::size_t n = c->wait(out, 20ms);
    for (std::size_t k = 0; k < n; ++k) {
      const Completion& e = out[k];
      if (e.kind != Completion::Kind::OpDone || e.op != OpKind::Call)
        return fail(47, "fault-caller %u: unexpected %s completion (op %s)", spec.caller,
                    std::string(to_string(e.kind)).c_str(), std::string(to_string(e.op)).c_str());
      const auto it = inflight.find(e.user_data);
      if (it == inflight.end())
        return fail(48, "fault-caller %u: completion %s for op %llu that is not in flight (duplicate or unknown)",
                    spec.caller, st(e.status).c_str(), (unsigned long long)e.user_data);
      Slot& s = slots[it->second];
      inflight.erase(it);
      s.id = 0;
      if (e.status == Status::Ok) {
        if (e.length != s.len || !itest::check_payload(s.resp.data, s.len, spec.caller, e.user_data))
          return fail(49, "fault-caller %u: op %llu: echo of %u bytes fails its checksum (got %u bytes)", spec.caller,
                      (unsigned long long)e.user_data, s.len, e.length);
        ++ok;
        max_call_ms = std::max<long long>(max_call_ms, ms_between(s.submitted, Clock::now()));
        const bool after = phase == Phase::Recovered || rode_out();
        if (after || (!spec.expect_fault && spec.stop && spec.stop->ready())) ++ok_after;
        if (after && t_ok_after == Clock::time_point{}) {
          t_ok_after = Clock::now();
          if (spec.recovered) spec.recovered->signal();
        }
        if (spec.progress && !progressed && ok >= spec.progress_after) {
          spec.progress->signal();
          progressed = true;
        }
        continue;
      }
      if (!allowed(e.status))
        return fail(50, "fault-caller %u: op %llu completed %s (allowed: %s)", spec.caller,
                    (unsigned long long)e.user_data, st(e.status).c_str(),
                    spec.expect_fault ? "Ok or the scenario's failure" : "Ok only");
      if (!fault_seen())
        return fail(51, "fault-caller %u: op failed %s before the fault", spec.caller, st(e.status).c_str());
      if (phase == Phase::Recovered)
        return fail(52, "fault-caller %u: op %llu failed %s after recovery", spec.caller,
                    (unsigned long long)e.user_data, st(e.status).c_str());
      ++failed;
      ++failed_by[e.status];
      if (t_fail == Clock::time_point{}) t_fail = Clock::now();
      phase = Phase::Draining;
    }
    if (phase != Phase::Draining || !inflight.empty()) continue;
    // Every call of the failed endpoint has completed: close it (it may
    // already be closed by the failure) and open the target again.
    if (ep != 0) {
      (void)c->close(ep, 5s);  // the failure may have closed it already
      ep = 0;
    }
    if (spec.reopen_after != nullptr && !spec.reopen_after->ready()) {
      // Not yet: the fault is still on. Nothing is in flight, so any
      // completion meanwhile is one too many.
      if (c->wait(out, 20ms) != 0) return fail(58, "fault-caller %u: a completion with nothing in flight", spec.caller);
      continue;
    }
    const auto reopen_deadline = Clock::now() + spec.reopen_within;
    Status last = Status::Ok;
    for (;;) {
      ++attempts;
      auto r = c->open(spec.target, 3s);
      if (r) {
        ep = r.value;
        break;
      }
      last = r.status;
      if (Clock::now() > reopen_deadline)
        return fail(53, "fault-caller %u: re-open of %s failed for %lld ms (last %s)", spec.caller, spec.target.c_str(),
                    (long long)spec.reopen_within.count(), st(last).c_str());
      // The peer or its service is not back yet: wait a little; nothing is in
      // flight, so any completion now is one too many.
      if (c->wait(out, 50ms) != 0) return fail(54, "fault-caller %u: a completion with nothing in flight", spec.caller);
    }
    phase = Phase::Recovered;
  }
  if (c->wait(out, 300ms) != 0)
    return fail(55, "fault-caller %u: a completion after every call had completed", spec.caller);
  if (submitted != ok + failed)
    return fail(56, "fault-caller %u: %llu submitted, %llu ok + %llu failed", spec.caller,
                (unsigned long long)submitted, (unsigned long long)ok, (unsigned long long)failed);
  if (spec.expect_fault && !spec.fault_optional && failed == 0 && t_fail == Clock::time_point{})
    return fail(57, "fault-caller %u: the fault failed no call", spec.caller);
  std::string by;
  for (const auto& [s, count] : failed_by) by += " " + st(s) + "=" + std::to_string(count);
  const Clock::time_point from = t_fault != Clock::time_point{} ? t_fault : t_fail;
  std::printf(
      "fault-caller %u: submitted=%llu ok=%llu failed=%llu%s detect_ms=%lld recovery_ms=%lld reopen_attempts=%llu "
      "max_call_ms=%lld\n",
      spec.caller, (unsigned long long)submitted, (unsigned long long)ok, (unsigned long long)failed, by.c_str(),
      ms_between(t_fault, t_fail), ms_between(from, t_ok_after), (unsigned long long)attempts, max_call_ms);
  std::fflush(stdout);
  return 0;
}

}  // namespace ferry::fault
