// ferryctl's command line: parsed into a plain struct so the rules (and the
// usage errors, exit code 2) are testable without running a process.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::ctl {

enum class CtlCommand {
  Help,
  Version,
  Status,
  Clients,
  Counters,
  Peers,
  Channels,
  Metrics,
  Top,
  Drain,
  Resume,
};

std::string_view to_string(CtlCommand c) noexcept;

struct Options {
  CtlCommand command = CtlCommand::Help;
  std::string control_path;  // resolved: --control, else the environment
  bool json = false;
  bool all = false;         // status: every counter, not only those that moved
  double interval_s = 1.0;  // top
  int count = 0;            // top: refreshes before exiting; 0 = until q/Ctrl-C
  double timeout_s = 5.0;   // per request
};

struct ParseOutcome {
  std::optional<Options> options;  // set on success
  std::string error;               // usage error message otherwise
};

// `args` excludes argv[0]. The control path falls back to
// control::default_control_path() when --control is absent.
ParseOutcome parse_options(const std::vector<std::string>& args);

std::string usage_text();

}  // namespace ferry::ctl
