// Command line (boost.program_options) and configuration file, both driven
// by the descriptor table (config_keys.h). Every value is read as text and
// parsed by its row, so "-1" or "12abc" is an error naming the key rather
// than a silently wrapped unsigned value. Exceptions stay inside this file:
// callers get an exit code and messages.
#include "daemon/config/config.h"

#include <boost/program_options.hpp>
#include <iostream>
#include <map>

#include "daemon/config/config_docs.h"
#include "daemon/config/config_file.h"
#include "daemon/config/config_keys.h"
#include "daemon/loop/engine_fault.h"

namespace po = boost::program_options;

namespace ferry::daemon {

namespace {

constexpr unsigned kHelpWidth = 110;  // --help: room for "--log-level trace|debug|info|warn|error"

struct Setting {
  std::string value;
  std::string origin;  // "" for the command line, "FILE:LINE" for the file
};

void add_options(po::options_description& all) {
  std::string section;
  std::optional<po::options_description> group;
  auto flush = [&] {
    if (group) all.add(*group);
  };
  for (const ConfigKey& k : config_keys()) {
    if (k.section != section) {
      flush();
      section = std::string(k.section);
      group.emplace(section, kHelpWidth, kHelpWidth / 2);
    }
    const std::string name(k.name);
    const std::string help = help_line(k);
    if (k.kind == ValueKind::Flag) {
      group->add_options()(name.c_str(), help.c_str());
    } else {
      group->add_options()(name.c_str(), po::value<std::string>()->value_name(help_value_name(k)), help.c_str());
    }
  }
  flush();
}

}  // namespace

ParseOutcome parse_command_line(int argc, const char* const* argv) { return parse_command_line(argc, argv, std::cerr); }

ParseOutcome parse_command_line(int argc, const char* const* argv, std::ostream& err) {
  ParseOutcome out;
  Config& c = out.config;
  auto fail = [&](const std::string& msg) {
    err << "ferryd: " << msg << "\n";
    out.exit_code = 2;
    return out;
  };

  po::options_description all("ferryd options", kHelpWidth, kHelpWidth / 2);
  add_options(all);
  po::variables_map vm;
  try {
    // No guessing: boost would take an unambiguous prefix for the whole name
    // (`--socket` for `--socket-group`), so a mistyped flag would set another.
    constexpr int kStyle = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(argc, argv).options(all).style(kStyle).run(), vm);
  } catch (const std::exception& e) {
    err << "ferryd: " << e.what() << "\n(see ferryd --help)\n";
    out.exit_code = 2;
    return out;
  }
  if (vm.count("help")) {
    std::cout << "usage: ferryd [options]\n" << all << "\n";
    out.exit_code = 0;
    return out;
  }
  if (vm.count("version")) {
    std::cout << version_text();
    out.exit_code = 0;
    return out;
  }
  if (vm.count("describe")) {
    std::cout << describe_keys_json() << "\n";
    out.exit_code = 0;
    return out;
  }
  out.check_config = vm.count("check-config") != 0;

  // The file first, then the command line over it: flags win.
  std::map<std::string, Setting> settings;
  const bool explicit_file = vm.count("config") != 0;
  const std::string file = explicit_file ? vm["config"].as<std::string>() : std::string(kDefaultConfigFile);
  if (explicit_file && file.empty()) return fail("invalid value '' for config: must name a file");
  std::string text;
  bool missing = false;
  if (const Error bad = read_config_file(file, !explicit_file, &text, &missing); bad.failed())
    return fail(bad.message());
  if (!missing) {
    c.config_file = file;
    std::vector<FileEntry> entries;
    if (const Error bad = parse_config_text(file, text, &entries); bad.failed()) return fail(bad.message());
    for (auto& e : entries) settings[e.key] = Setting{std::move(e.value), file + ":" + std::to_string(e.line)};
  }
  for (const auto& [name, value] : vm) {
    const ConfigKey* k = find_key(name);
    if (k == nullptr || k->kind == ValueKind::Flag || k->name == "config") continue;
    settings[name] = Setting{value.as<std::string>(), ""};
  }

  for (const auto& [name, s] : settings) {
    const ConfigKey* k = find_key(name);
    if (k == nullptr || k->access.parse == nullptr) continue;  // parse_config_text refused unknown keys
    if (const Error why = k->access.parse(c, s.value); why.failed()) {
      return fail((s.origin.empty() ? "" : s.origin + ": ") + "invalid value '" + s.value + "' for " + name + ": " +
                  why.message());
    }
  }
  if (const Error bad = check_ranges(c); bad.failed()) return fail(bad.message());
  if (const Error bad = check_system(c); bad.failed()) return fail(bad.message());
  EngineFault fault;
  if (const Error bad = engine_fault_from_env(&fault); bad.failed()) return fail(bad.message());
  c.fault_forget_call_after = fault.forget_call_after;
  return out;
}

std::string describe(const Config& c) {
  std::string out = "# config file: " + (c.config_file.empty() ? std::string("(none)") : c.config_file) + "\n";
  for (const ConfigKey& k : config_keys()) {
    if (k.scope != Scope::Anywhere) continue;
    out += std::string(k.name) + " = " + value_text(k, c) + "\n";
  }
  return out;
}

}  // namespace ferry::daemon
