// The incast verdict (every message accounted for) and its extra --json
// fields, from the shared board once every process has finished.
#include <cstdio>
#include <utility>

#include "scenario_incast.h"

namespace ferry::bench {

namespace {

std::string field(const char* key, std::uint64_t v) { return ",\"" + std::string(key) + "\":" + std::to_string(v); }

// A message not accounted for: lost, doubled, corrupt or completed wrongly.
Error wrong(std::string what) { return Error(Status::ProtocolError, std::move(what)); }

}  // namespace

Error check_incast_results(const IncastPlan& plan, const IncastShared& shared) {
  const IncastBoard& b = shared.board();
  std::uint64_t main_ok = 0, stall_ok = 0;
  for (std::uint32_t s = 0; s < plan.streams(); ++s) {
    const SenderBoard& sb = b.senders[s];
    const std::string who = "sender " + std::to_string(s);
    if (sb.failed) return wrong(who + ": " + sb.error);
    if (sb.double_completions != 0) return wrong(who + ": a Send completed twice");
    const std::uint64_t delivered = shared.bits_set(s, plan.max_seq);
    if (!plan.stalled_stream(s)) {
      const std::uint64_t want = plan.warmup + plan.measured[s];
      if (sb.issued != want || sb.ok != want)
        return wrong(who + ": " + std::to_string(sb.ok) + " of " + std::to_string(want) + " messages completed Ok");
      if (sb.measured != plan.measured[s]) return wrong(who + ": latency samples missing");
      if (delivered != want || shared.bits_set(s, want) != want)
        return wrong(who + ": the receiver got " + std::to_string(delivered) + " of its " + std::to_string(want) +
                     " messages");
      main_ok += sb.ok;
    } else {
      // Exactly one completion per Send, each Ok, Busy or Timeout.
      if (sb.ok + sb.busy + sb.timeouts != sb.issued)
        return wrong(who + " (stalled service): " + std::to_string(sb.issued) + " Sends but " +
                     std::to_string(sb.ok + sb.busy + sb.timeouts) + " completions");
      // Delivered exactly when it completed Ok: a refused or timed-out
      // message must not turn up anyway (nothing lost or doubled silently).
      if (delivered != sb.ok)
        return wrong(who + " (stalled service): " + std::to_string(sb.ok) + " Sends completed Ok but " +
                     std::to_string(delivered) + " were delivered");
      stall_ok += sb.ok;
    }
  }
  for (int r = 0; r < 2; ++r) {
    const ReceiverBoard& rb = b.receivers[r];
    if (rb.failed) return wrong(rb.error);
    if (rb.corrupt != 0 || rb.duplicates != 0) return wrong("receiver saw corrupt or duplicate messages");
  }
  if (b.receivers[0].delivered != main_ok)
    return wrong("the receiver verified " + std::to_string(b.receivers[0].delivered) +
                 " messages, the senders completed " + std::to_string(main_ok) + " Ok");
  if (b.receivers[1].delivered != stall_ok)
    return wrong("the stalled receiver's count differs from its senders' Ok count");
  return {};
}

std::string incast_json_fields(const IncastPlan& plan, const IncastShared& shared, const FlowCounters& delta) {
  const IncastBoard& b = shared.board();
  std::uint64_t busy = 0, stall_sends = 0, stall_ok = 0, stall_busy = 0, stall_timeouts = 0;
  for (std::uint32_t s = 0; s < plan.streams(); ++s) {
    const SenderBoard& sb = b.senders[s];
    if (plan.stalled_stream(s)) {
      stall_sends += sb.issued;
      stall_ok += sb.ok;
      stall_busy += sb.busy;
      stall_timeouts += sb.timeouts;
    } else {
      busy += sb.busy;
    }
  }
  std::string out = field("senders", plan.senders) + field("sender_daemons", plan.sender_sockets.size()) +
                    field("per_sender_concurrency", plan.concurrency) + field("warmup_per_sender", plan.warmup) +
                    field("delivered", b.receivers[0].delivered) + field("delivered_bytes", b.receivers[0].bytes) +
                    field("busy_retries", busy) + field("stall_senders", plan.stall_senders) +
                    field("stall_sends", stall_sends) + field("stall_ok", stall_ok) + field("stall_busy", stall_busy) +
                    field("stall_timeouts", stall_timeouts) + field("stall_delivered", b.receivers[1].delivered);
  return out + to_json_fields(delta);
}

}  // namespace ferry::bench
