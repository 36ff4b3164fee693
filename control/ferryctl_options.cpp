// ferryctl argument parsing. Options may come before or after the command
// (`ferryctl --control P status --json` and `ferryctl status --json
// --control P` both work) because scripts write both orders.
#include "control/ferryctl_options.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "control/control_protocol.h"

namespace ferry::ctl {
namespace {

constexpr std::array<std::pair<CtlCommand, std::string_view>, 10> kNames{{
    {CtlCommand::Help, "help"},
    {CtlCommand::Version, "version"},
    {CtlCommand::Status, "status"},
    {CtlCommand::Clients, "clients"},
    {CtlCommand::Counters, "counters"},
    {CtlCommand::Peers, "peers"},
    {CtlCommand::Channels, "channels"},
    {CtlCommand::Metrics, "metrics"},
    {CtlCommand::Top, "top"},
    {CtlCommand::Drain, "drain"},
}};

std::optional<CtlCommand> command_named(std::string_view s) {
  for (const auto& [c, n] : kNames) {
    if (n == s) return c;
  }
  return std::nullopt;
}

std::optional<double> parse_positive_double(const std::string& s) {
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(d) || d <= 0) return std::nullopt;
  return d;
}

std::optional<int> parse_count(const std::string& s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v < 1) return std::nullopt;
  return v;
}

ParseOutcome usage_error(std::string msg) { return ParseOutcome{std::nullopt, std::move(msg)}; }

}  // namespace

std::string_view to_string(CtlCommand c) noexcept {
  for (const auto& [cmd, n] : kNames) {
    if (cmd == c) return n;
  }
  return "unknown";
}

ParseOutcome parse_options(const std::vector<std::string>& args) {
  Options o;
  std::optional<CtlCommand> command;
  std::optional<std::string> control;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    std::optional<std::string> inline_value;
    if (arg.rfind("--", 0) == 0) {
      if (auto eq = arg.find('='); eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg.resize(eq);
      }
    }
    // Fetches the value of an option that takes one (--opt V or --opt=V).
    auto value = [&](std::string* out) -> bool {
      if (inline_value) {
        *out = *inline_value;
        return true;
      }
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    std::string v;
    if (arg == "-h" || arg == "--help") {
      command = CtlCommand::Help;
    } else if (arg == "-V" || arg == "--version") {
      command = CtlCommand::Version;
    } else if (arg == "--json") {
      if (inline_value) return usage_error("--json takes no value");
      o.json = true;
    } else if (arg == "--control" || arg == "-c") {
      if (!value(&v) || v.empty()) return usage_error("--control needs a socket path");
      control = v;
    } else if (arg == "--interval") {
      if (!value(&v)) return usage_error("--interval needs a number of seconds");
      auto d = parse_positive_double(v);
      if (!d) return usage_error("--interval must be a positive number of seconds, got '" + v + "'");
      o.interval_s = *d;
    } else if (arg == "--count") {
      if (!value(&v)) return usage_error("--count needs a number");
      auto n = parse_count(v);
      if (!n) return usage_error("--count must be a positive integer, got '" + v + "'");
      o.count = *n;
    } else if (arg == "--timeout") {
      if (!value(&v)) return usage_error("--timeout needs a number of seconds");
      auto d = parse_positive_double(v);
      if (!d) return usage_error("--timeout must be a positive number of seconds, got '" + v + "'");
      o.timeout_s = *d;
    } else if (!arg.empty() && arg[0] == '-') {
      return usage_error("unknown option '" + arg + "'");
    } else {
      auto c = command_named(arg);
      if (!c) return usage_error("unknown command '" + arg + "'");
      // Help/version given as options win over a command word.
      if (command && *command != CtlCommand::Help && *command != CtlCommand::Version) {
        return usage_error("more than one command ('" + std::string(to_string(*command)) + "' and '" + arg + "')");
      }
      if (!command) command = c;
    }
  }
  if (!command) return usage_error("no command given");
  o.command = *command;
  o.control_path = control ? *control : control::default_control_path();
  return ParseOutcome{o, {}};
}

std::string usage_text() {
  return "usage: ferryctl [--control PATH] COMMAND [--json] [options]\n"
         "\n"
         "Inspect a running ferryd over its control socket.\n"
         "\n"
         "commands:\n"
         "  status     version, uptime, transport, clients, peers and counters\n"
         "  clients    attached client processes\n"
         "  counters   daemon counters\n"
         "  peers      peer daemons\n"
         "  channels   channels to peer daemons\n"
         "  metrics    Prometheus text exposition of the status (--json: {sample: value})\n"
         "  top        live counter rates (q or Ctrl-C to quit)\n"
         "  drain      ask the daemon to stop accepting work and drain\n"
         "  help       this text\n"
         "\n"
         "options:\n"
         "  --control PATH   control socket (default: $FERRY_CONTROL, else\n"
         "                   dirname($FERRY_SOCKET)/control.sock, else /run/ferry/control.sock)\n"
         "  --json           print the daemon's JSON result (top: one object per refresh)\n"
         "  --interval S     top: seconds between refreshes (default 1)\n"
         "  --count N        top: exit after N refreshes\n"
         "  --timeout S      seconds to wait for the daemon (default 5)\n"
         "  -h, --help       this text\n"
         "  -V, --version    ferryctl version\n"
         "\n"
         "exit status: 0 ok, 1 daemon error or unreachable, 2 usage error\n";
}

}  // namespace ferry::ctl
