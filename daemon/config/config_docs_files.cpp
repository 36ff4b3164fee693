// The three documents made from the descriptor table: the example
// ferryd.conf, the man page's option list and the configuration reference.
#include "daemon/config/config_docs.h"
#include "daemon/config/config_rules.h"

namespace ferry::daemon {

namespace {

// Greedy word wrap; each line starts with `prefix`.
std::string wrap(std::string_view text, std::size_t width, std::string_view prefix) {
  std::string out, line;
  auto flush = [&] {
    out += std::string(prefix) + line;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "\n";
    line.clear();
  };
  while (!text.empty()) {
    const auto sp = text.find(' ');
    const std::string_view word = text.substr(0, sp);
    text = sp == std::string_view::npos ? std::string_view{} : text.substr(sp + 1);
    if (word.empty()) continue;
    if (!line.empty() && prefix.size() + line.size() + 1 + word.size() > width) flush();
    if (!line.empty()) line += ' ';
    line += word;
  }
  if (!line.empty()) flush();
  return out;
}

std::string capital(std::string_view s) {
  std::string out(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

// "In [1, 4096] (count)." / "One of rdma, tcp, auto." / "".
std::string range_sentence(const ConfigKey& k) {
  const std::string r = range_text(k);
  if (r.empty()) return {};
  const std::string unit = k.kind == ValueKind::Number && k.unit != Unit::None && k.unit != Unit::Count
                               ? " " + std::string(to_string(k.unit))
                               : "";
  return capital(r) + unit + ".";
}

std::string reload_sentence(Reload r) {
  switch (r) {
    case Reload::Live: return "SIGHUP applies a change at once.";
    case Reload::NewClients: return "SIGHUP applies a change to clients that attach afterwards.";
    case Reload::Restart: return "A change needs a restart.";
    case Reload::Never: return {};
  }
  return {};
}

// The prose of one option: summary, range, details, reload.
std::string prose(const ConfigKey& k, bool with_reload) {
  std::string s = capital(k.summary) + ".";
  if (const auto r = range_sentence(k); !r.empty()) s += " " + r;
  if (!k.details.empty()) s += " " + std::string(k.details);
  if (with_reload && k.reload != Reload::Restart) s += " " + reload_sentence(k.reload);
  return s;
}

// roff: a backslash is \e, a hyphen in an option name is \-, and a line may
// not start with '.' or '\''.
std::string roff(std::string_view text) {
  std::string out;
  for (char ch : text) {
    if (ch == '\\') {
      out += "\\e";
    } else {
      out += ch;
    }
  }
  return out;
}

std::string roff_lines(const std::string& wrapped) {
  std::string out;
  std::size_t start = 0;
  while (start < wrapped.size()) {
    const auto nl = wrapped.find('\n', start);
    std::string line = wrapped.substr(start, nl - start);
    if (!line.empty() && (line[0] == '.' || line[0] == '\'')) line = "\\&" + line;
    out += line + "\n";
    start = nl + 1;
  }
  return out;
}

std::string roff_flag(std::string_view name) {
  std::string out = "\\-\\-";
  for (char ch : name) out += ch == '-' ? std::string("\\-") : std::string(1, ch);
  return out;
}

std::string markdown_cell(std::string_view s) {
  std::string out;
  for (char ch : s) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

}  // namespace

std::string example_conf() {
  std::string out =
      "# /etc/ferry/ferryd.conf: configuration of ferryd, the ferry daemon.\n"
      "#\n"
      "# Generated from ferryd's option table (daemon/config/config_keys.cpp) by\n"
      "# `ninja -C build config-docs`; edit the table, not this file.\n"
      "#\n"
      "# ferryd reads this file when it is started without --config and the file\n"
      "# exists. Every key is also a command-line flag (--KEY VALUE); a flag\n"
      "# overrides the file. Each key below is commented out at its default:\n"
      "# uncomment and edit to change it. An unknown key, a key given twice or a\n"
      "# command-line-only option (help, config, check-config) is an error.\n"
      "#\n"
      "# Check a change before restarting:   ferryd --check-config\n"
      "# Apply a change to a running daemon: systemctl reload ferryd (SIGHUP);\n"
      "#   each key says when SIGHUP applies it; any other change is logged as\n"
      "#   \"needs a restart\" and keeps its running value.\n"
      "#\n"
      "# Sizes take a k, m or g suffix (binary: 1k = 1024).\n";
  std::string_view section;
  for (const ConfigKey& k : config_keys()) {
    if (k.scope != Scope::Anywhere) continue;
    if (k.section != section) {
      section = k.section;
      out += "\n## " + std::string(section) + "\n";
    }
    out += "\n" + wrap(prose(k, true), 78, "# ");
    const std::string d = default_text(k);
    out += "#" + std::string(k.name) + " =" + (d.empty() ? "" : " " + d) + "\n";
  }
  return out;
}

std::string man_options() {
  std::string out;
  std::string_view section;
  for (const ConfigKey& k : config_keys()) {
    if (k.section != section) {
      section = k.section;
      out += ".SS " + roff(section) + "\n";
    }
    out += ".TP\n";
    if (k.kind == ValueKind::Flag) {
      out += ".B " + roff_flag(k.name) + "\n";
    } else if (k.kind == ValueKind::Choice) {
      out += ".BR " + roff_flag(k.name) + " \" " + roff(help_value_name(k)) + "\"\n";
    } else {
      out += ".BI " + roff_flag(k.name) + " \" " + roff(help_value_name(k)) + "\"\n";
    }
    std::string text = prose(k, true);
    if (k.kind != ValueKind::Flag && k.scope == Scope::Anywhere) {
      const std::string d = default_text(k);
      text += " Default: " + (d.empty() ? std::string("empty") : d) + ".";
    }
    out += roff_lines(wrap(roff(text), 78, ""));
  }
  out += ".SS Rules between options\n";
  for (const CrossRule& r : cross_rules())
    out += ".IP \\(bu 2\n" + roff_lines(wrap(roff(std::string(r.rule) + "."), 78, ""));
  return out;
}

std::string reference_markdown() {
  std::string out;
  std::string_view section;
  std::string notes;
  auto end_section = [&] {
    if (!notes.empty()) out += "\n" + notes;
    notes.clear();
  };
  for (const ConfigKey& k : config_keys()) {
    if (k.section != section) {
      end_section();
      section = k.section;
      out += "\n### " + std::string(section) + "\n\n";
      out += "| Option | Default | Allowed | SIGHUP | Meaning |\n|---|---|---|---|---|\n";
    }
    const bool value = k.kind != ValueKind::Flag;
    const std::string flag = "`--" + std::string(k.name) + (value ? " " + help_value_name(k) : "") + "`";
    std::string dflt = "";
    if (value && k.scope == Scope::Anywhere) {
      const std::string d = default_text(k);
      dflt = d.empty() ? "(empty)" : "`" + d + "`";
    }
    std::string allowed = range_text(k);
    if (k.kind == ValueKind::Number && k.unit != Unit::None && k.unit != Unit::Count)
      allowed += " " + std::string(to_string(k.unit));
    const std::string reload = k.reload == Reload::Live         ? "at once"
                               : k.reload == Reload::NewClients ? "new clients"
                               : k.reload == Reload::Restart    ? "restart"
                                                                : "";
    out += "| " + markdown_cell(flag) + " | " + markdown_cell(dflt) + " | " + markdown_cell(allowed) + " | " + reload +
           " | " + markdown_cell(capital(k.summary)) + " |\n";
    if (!k.details.empty()) notes += wrap("- `" + std::string(k.name) + "`: " + std::string(k.details), 100, "");
  }
  end_section();
  out += "\n### Rules between options\n\n";
  for (const CrossRule& r : cross_rules())
    out += wrap("- " + std::string(r.rule) + " (" + std::string(r.keys) + ").", 100, "");
  out +=
      "\nA value or a rule that does not hold stops start-up (exit 2) and `--check-config` with a message\n"
      "naming the option(s) and the allowed range, and a SIGHUP keeps the running configuration. A caution\n"
      "that does not hold is logged as a warning at start-up and printed by `--check-config` after its\n"
      "\"configuration OK\" line; the daemon runs.\n";
  return out;
}

}  // namespace ferry::daemon
