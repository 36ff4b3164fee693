// The fault tests' client role: keeps `concurrency` calls in flight to an
// echo service with checksummed payloads (tests/integration/traffic.h),
// records every completion by op id and enforces, for every call it
// submitted, exactly one completion: Ok with the echo verified byte for
// byte, or one of the failure statuses the scenario allows. After the first
// failure it stops submitting, waits for every call still in flight, closes
// the endpoint, re-opens the target (retrying while the peer or service is
// not back) and goes on until `after_recovery` more calls were verified.
//
// Prints one line to stdout:
//   fault-caller C: submitted=S ok=K failed=F [STATUS=n...] detect_ms=D
//   recovery_ms=R reopen_attempts=A max_call_ms=M
// recovery_ms: from the fault to the first verified call after re-open;
// detect_ms: from the fault to the first failure seen. max_call_ms: the
// slowest verified call: with a fault recovered below the application (a
// rebuilt lane) no call fails and this is the time traffic stood still. The fault's time is
// when the parent opened the `fault` gate (it injects the fault), else the
// submission of the call found stuck (stuck_after), else unknown: then
// detect_ms is -1 and recovery_ms counts from the first failure.
// Returns 0, or a distinct non-zero code per violated property.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ferry/client.h"
#include "tests/integration/traffic.h"

namespace ferry::fault {

using namespace std::chrono_literals;

struct FaultCallerSpec {
  std::string socket;
  std::string target;  // HOST:PORT/echo (identity echo: run_rpc_server)
  std::uint32_t caller = 0;
  std::uint32_t concurrency = 8;
  std::uint32_t max_size = 4096;
  bool expect_fault = true;      // false: every call must succeed (a bystander)
  std::vector<Status> failures;  // what a call may fail with once the fault hit
  // > 0: a call in flight this long is the fault's (a dropped frame nobody
  // will ever answer): close the endpoint, whose calls then complete Cancelled.
  std::chrono::milliseconds stuck_after{0};
  const itest::Gate* fault = nullptr;     // opened by the parent right before it injects the fault
  const itest::Gate* progress = nullptr;  // signalled after `progress_after` verified calls
  std::uint64_t progress_after = 50;
  const itest::Gate* recovered = nullptr;     // signalled at the first verified call after re-open
  std::uint64_t after_recovery = 100;         // verified calls after re-open (bystander: after `stop`)
  const itest::Gate* stop = nullptr;          // when set: also run until it is ready
  const itest::Gate* reopen_after = nullptr;  // when set: no re-open before it is ready (the fault is over)
  // With reopen_after: the fault may also pass without failing any call
  // (e.g. RC retransmissions outlast a short link outage). Then the caller
  // needs `after_recovery` verified calls after reopen_after opened, and
  // recovery_ms runs to the first of them.
  bool fault_optional = false;
  std::chrono::milliseconds open_within{10s};  // the first open (a slow channel set-up retries)
  std::chrono::milliseconds reopen_within{20s};
  std::chrono::milliseconds run_within{45s};
};

int run_fault_caller(const FaultCallerSpec& spec);

}  // namespace ferry::fault
