// The flow-control counters of the daemons an incast run involves, read
// from their control sockets (the same `status` that `ferryctl status
// --json` prints) before and after the measured phase.
#include <cstdio>

#include "control/control_client.h"
#include "scenario_incast.h"

namespace ferry::bench {

namespace {

std::uint64_t counter(const json::Value& counters, const char* name, bool* ok) {
  const json::Value* v = counters.find(name);
  const auto n = v ? v->as_uint() : std::nullopt;
  if (!n) *ok = false;
  return n.value_or(0);
}

}  // namespace

FlowCounters read_flow_counters(const std::vector<std::string>& control_paths) {
  FlowCounters sum;
  for (const auto& path : control_paths) {
    const auto reply = control::call(path, control::Command::Status, std::chrono::milliseconds(3000));
    const json::Value* c = reply.ok() ? reply.result.find("counters") : nullptr;
    if (c == nullptr) {
      sum.read_ok = false;
      continue;
    }
    sum.rnr_naks += counter(*c, "rnr_naks", &sum.read_ok);
    sum.credit_stalls += counter(*c, "credit_stalls", &sum.read_ok);
    sum.window_stalls += counter(*c, "window_stalls", &sum.read_ok);
    sum.busy_rejects += counter(*c, "busy_rejects", &sum.read_ok);
    sum.timeouts += counter(*c, "timeouts", &sum.read_ok);
    sum.staged += counter(*c, "staged", &sum.read_ok);
    sum.parked += counter(*c, "parked", &sum.read_ok);
  }
  return sum;
}

FlowCounters operator-(const FlowCounters& a, const FlowCounters& b) {
  FlowCounters d;
  d.read_ok = a.read_ok && b.read_ok;
  d.rnr_naks = a.rnr_naks - b.rnr_naks;
  d.credit_stalls = a.credit_stalls - b.credit_stalls;
  d.window_stalls = a.window_stalls - b.window_stalls;
  d.busy_rejects = a.busy_rejects - b.busy_rejects;
  d.timeouts = a.timeouts - b.timeouts;
  d.staged = a.staged - b.staged;
  d.parked = a.parked - b.parked;
  return d;
}

std::string to_json_fields(const FlowCounters& c) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                ",\"counters_read\":%s,\"rnr_naks\":%llu,\"credit_stalls\":%llu,\"window_stalls\":%llu,"
                "\"busy_rejects\":%llu,\"daemon_timeouts\":%llu,\"staged\":%llu,\"parked\":%llu",
                c.read_ok ? "true" : "false", static_cast<unsigned long long>(c.rnr_naks),
                static_cast<unsigned long long>(c.credit_stalls), static_cast<unsigned long long>(c.window_stalls),
                static_cast<unsigned long long>(c.busy_rejects), static_cast<unsigned long long>(c.timeouts),
                static_cast<unsigned long long>(c.staged), static_cast<unsigned long long>(c.parked));
  return buf;
}

}  // namespace ferry::bench
