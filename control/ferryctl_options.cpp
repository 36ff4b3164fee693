// ferryctl argument parsing through boost.program_options. Options may come
// before or after the command (`ferryctl --control P status --json` and
// `ferryctl status --json --control P` both work) because scripts write
// both orders; the command is the one positional argument.
#include "control/ferryctl_options.h"

#include <array>
#include <boost/program_options.hpp>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "control/control_protocol.h"

namespace po = boost::program_options;

namespace ferry::ctl {
namespace {

struct CommandName {
  CtlCommand command;
  std::string_view name;
  std::string_view help;
};

constexpr std::array<CommandName, 11> kNames{{
    {CtlCommand::Status, "status", "version, uptime, transport, clients, peers and counters"},
    {CtlCommand::Clients, "clients", "attached client processes"},
    {CtlCommand::Counters, "counters", "daemon counters"},
    {CtlCommand::Peers, "peers", "peer daemons"},
    {CtlCommand::Channels, "channels", "channels to peer daemons"},
    {CtlCommand::Metrics, "metrics", "Prometheus text exposition of the status (--json: {sample: value})"},
    {CtlCommand::Top, "top", "live counter rates (q or Ctrl-C to quit)"},
    {CtlCommand::Drain, "drain", "refuse new attaches, keep serving attached clients (privileged)"},
    {CtlCommand::Resume, "resume", "undo drain: accept attaches again (privileged)"},
    {CtlCommand::Help, "help", "this text"},
    {CtlCommand::Version, "version", "ferryctl version"},
}};

std::optional<CtlCommand> command_named(std::string_view s) {
  for (const auto& c : kNames) {
    if (c.name == s) return c.command;
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

po::options_description option_table() {
  po::options_description d("options");
  // Values are read as text and checked below, so errors say what was wrong.
  d.add_options()("control,c", po::value<std::string>()->value_name("PATH"),
                  "control socket (default: $FERRY_CONTROL, else dirname($FERRY_SOCKET)/control.sock, else "
                  "/run/ferry/control.sock)")("json", po::bool_switch(),
                                              "print the daemon's JSON result (top: one object per refresh)")(
      "all", po::bool_switch(), "status: list every counter, not only those that are not 0")(
      "interval", po::value<std::string>()->value_name("S"), "top: seconds between refreshes (default 1)")(
      "count", po::value<std::string>()->value_name("N"), "top: exit after N refreshes")(
      "timeout", po::value<std::string>()->value_name("S"), "seconds to wait for the daemon (default 5)")(
      "help,h", po::bool_switch(), "this text")("version,V", po::bool_switch(), "ferryctl version");
  return d;
}

}  // namespace

std::string_view to_string(CtlCommand c) noexcept {
  for (const auto& n : kNames) {
    if (n.command == c) return n.name;
  }
  return "unknown";
}

ParseOutcome parse_options(const std::vector<std::string>& args) {
  po::options_description visible = option_table();
  po::options_description all;
  all.add(visible).add_options()("command", po::value<std::vector<std::string>>());
  po::positional_options_description positional;
  positional.add("command", -1);
  po::variables_map vm;
  try {
    // No guessing: a prefix (`--cont`) must not silently become another option.
    constexpr int kStyle = po::command_line_style::unix_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(args).options(all).positional(positional).style(kStyle).run(), vm);
  } catch (const po::error& e) {
    return usage_error(e.what());
  }
  Options o;
  std::optional<CtlCommand> command;
  if (vm.count("command")) {
    const auto& words = vm["command"].as<std::vector<std::string>>();
    for (const auto& w : words) {
      if (!command_named(w)) return usage_error("unknown command '" + w + "'");
    }
    if (words.size() > 1) return usage_error("more than one command ('" + words[0] + "' and '" + words[1] + "')");
    command = command_named(words[0]);
  }
  // Help/version given as options win over a command word.
  if (vm["help"].as<bool>()) command = CtlCommand::Help;
  if (vm["version"].as<bool>() && command != CtlCommand::Help) command = CtlCommand::Version;
  o.json = vm["json"].as<bool>();
  o.all = vm["all"].as<bool>();
  if (vm.count("control")) {
    const auto& v = vm["control"].as<std::string>();
    if (v.empty()) return usage_error("--control needs a socket path");
    o.control_path = v;
  }
  if (vm.count("interval")) {
    const auto& v = vm["interval"].as<std::string>();
    const auto d = parse_positive_double(v);
    if (!d) return usage_error("--interval must be a positive number of seconds, got '" + v + "'");
    o.interval_s = *d;
  }
  if (vm.count("count")) {
    const auto& v = vm["count"].as<std::string>();
    const auto n = parse_count(v);
    if (!n) return usage_error("--count must be a positive integer, got '" + v + "'");
    o.count = *n;
  }
  if (vm.count("timeout")) {
    const auto& v = vm["timeout"].as<std::string>();
    const auto d = parse_positive_double(v);
    if (!d) return usage_error("--timeout must be a positive number of seconds, got '" + v + "'");
    o.timeout_s = *d;
  }
  if (!command) return usage_error("no command given");
  o.command = *command;
  if (o.control_path.empty()) o.control_path = control::default_control_path();
  return ParseOutcome{o, {}};
}

std::string usage_text() {
  std::ostringstream s;
  s << "usage: ferryctl [--control PATH] COMMAND [--json] [options]\n"
       "\n"
       "Inspect a running ferryd over its control socket.\n"
       "\n"
       "commands:\n";
  for (const auto& c : kNames) {
    std::string name(c.name);
    name.resize(11, ' ');
    s << "  " << name << c.help << "\n";
  }
  s << "\n" << option_table() << "\nexit status: 0 ok, 1 daemon error or unreachable, 2 usage error\n";
  return s.str();
}

}  // namespace ferry::ctl
