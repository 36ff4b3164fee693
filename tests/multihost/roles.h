// Process roles the multihost tests add to the integration ones
// (tests/integration/traffic.h): an echo server for several named
// services, and a caller that runs until its peer fails and checks that
// every call it had in flight completes exactly once.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ferry/client.h"
#include "tests/integration/traffic.h"

namespace ferry::mhtest {

// Serves every name in `services` (identity echo) until `stop` is ready.
int run_echo_services(const std::string& socket, const std::vector<std::string>& services, const itest::Gate& ready,
                      const itest::Gate& stop);

// A client that attaches to `socket` as `name`, opens `target` (waiting up
// to `open_within`) and makes one verified echo call of `len` bytes over
// it (itest::echo_checked, sender id `sender`). 0, or the child's failure
// code: 1 attach, 2 open, 3 echo (each with a line on stderr).
int open_and_echo(const std::string& socket, const std::string& name, const std::string& target,
                  std::chrono::milliseconds open_within, std::uint32_t len, std::uint32_t sender);

// A client that attaches to `socket` as `name`, opens `target` (waiting
// up to 10 s), signals `holding` and keeps the endpoint (and so its
// channel's connections) until `done`; then one verified echo call of 1,500
// bytes over it (sender id `sender`) shows the channel still works. 0, or
// the child's failure code: 1 attach, 2 open, 3 never told done, 4 echo.
int hold_then_echo(const std::string& socket, const std::string& name, const std::string& target,
                   const itest::Gate& holding, const itest::Gate& done, std::uint32_t sender);

// A client that attaches as `name` and opens `target` (waiting up to
// `open_within`), which must fail Busy, and not before `at_least`: an Open
// that waited for a free connection slot, here or at the peer, within its
// budget. 0, or the child's failure code: 1 attach, 2 another outcome, 3
// Busy too soon (each with a line on stderr).
int open_expect_busy(const std::string& socket, const std::string& name, const std::string& target,
                     std::chrono::milliseconds open_within, std::chrono::milliseconds at_least);

struct UntilResetSpec {
  std::string socket;
  std::string target;  // HOST:PORT/SERVICE of an echo service on the daemon that will die
  std::uint32_t caller = 0;
  std::uint32_t concurrency = 8;
  std::uint32_t max_size = 65536;
  const itest::Gate* progress = nullptr;  // signalled after `progress_after` verified calls
  std::uint64_t progress_after = 50;
  const itest::Gate* killed = nullptr;  // the parent signals it right after the SIGKILL
  std::chrono::milliseconds bound{0};   // all in-flight calls done within this after `killed`
};
// Calls with verified echoes until a call fails; from then on issues
// nothing and requires every call still in flight to complete exactly once
// with PeerReset, within spec.bound of the kill.
int run_until_reset(const UntilResetSpec& spec);

class Cluster;
// A call held past its timeout across a channel: a late server on node 1
// serving "late", a timeout caller on node 0 (itest::run_late_server /
// run_timeout_caller; spec.socket and spec.target are filled in here).
// Returns "" when both roles passed, else what failed.
std::string remote_call_times_out(const Cluster& cl, itest::TimeoutCallerSpec spec);

}  // namespace ferry::mhtest
