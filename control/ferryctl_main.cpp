// ferryctl: inspect a running ferryd over its control socket.
#include <cstdio>
#include <string>
#include <vector>

#include "control/ferryctl_commands.h"
#include "control/ferryctl_options.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = ferry::ctl::parse_options(args);
  if (!parsed.options) {
    std::fprintf(stderr, "ferryctl: %s\n%s", parsed.error.c_str(), "Try 'ferryctl --help'.\n");
    return ferry::ctl::kExitUsage;
  }
  return ferry::ctl::run_command(*parsed.options);
}
