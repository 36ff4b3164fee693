// --help, --version and --describe from the descriptor table.
#include "daemon/config/config_docs.h"

#include "base/json.h"
#include "ferry_config.h"
#include "transport/fault_spec.h"

namespace ferry::daemon {

namespace {

std::string reload_hint(Reload r) {
  switch (r) {
    case Reload::Live: return "SIGHUP applies a change";
    case Reload::NewClients: return "SIGHUP: clients attaching afterwards";
    case Reload::Restart:
    case Reload::Never: return {};
  }
  return {};
}

}  // namespace

std::string help_value_name(const ConfigKey& key) {
  if (key.kind == ValueKind::Choice) return std::string(key.choices);
  return key.value_name.empty() ? std::string("VALUE") : std::string(key.value_name);
}

std::string help_line(const ConfigKey& key) {
  std::string out(key.summary);
  std::string extra;
  auto add = [&](const std::string& part) {
    if (part.empty()) return;
    extra += (extra.empty() ? "" : "; ") + part;
  };
  if (key.kind != ValueKind::Flag && key.scope == Scope::Anywhere) {
    const std::string d = default_text(key);
    add("default " + (d.empty() ? std::string("empty") : d));
  }
  if (key.kind == ValueKind::Number)
    add(range_text(key) + (key.unit == Unit::None ? "" : " " + std::string(to_string(key.unit))));
  add(reload_hint(key.reload));
  if (!extra.empty()) out += " [" + extra + "]";
  return out;
}

std::string version_text() {
  std::string out = std::string("ferryd ") + FERRY_VERSION + "\n";
  if constexpr (transport::kFaultInjection) {
    out += "fault injection: compiled in (a test build: the FERRY_FAULT_* switches work; do not deploy it)\n";
  } else {
    out += "fault injection: not compiled in\n";
  }
  return out;
}

std::string describe_keys_json() {
  json::Array keys;
  for (const ConfigKey& k : config_keys()) {
    json::Object o;
    o["name"] = k.name;
    o["section"] = k.section;
    o["type"] = to_string(k.kind);
    o["unit"] = to_string(k.unit);
    o["scope"] = k.scope == Scope::Anywhere ? "file-and-command-line" : "command-line";
    o["reload"] = to_string(k.reload);
    o["summary"] = k.summary;
    if (!k.details.empty()) o["details"] = k.details;
    if (k.kind != ValueKind::Flag && k.scope == Scope::Anywhere) o["default"] = default_text(k);
    if (k.kind == ValueKind::Number) {
      o["min"] = k.min;
      if (k.max_key.empty()) {
        o["max"] = k.max;
      } else {
        o["max_key"] = k.max_key;
      }
      o["power_of_two"] = k.power_of_two;
    }
    if (k.kind == ValueKind::Choice) {
      json::Array choices;
      std::string_view rest = k.choices;
      while (!rest.empty()) {
        const auto bar = rest.find('|');
        choices.emplace_back(rest.substr(0, bar));
        rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
      }
      o["choices"] = std::move(choices);
    }
    keys.emplace_back(std::move(o));
  }
  return json::dump(json::Value(std::move(keys)), 1);
}

Error splice(const std::string& file, const Markers& m, const std::string& block, std::string* out) {
  const auto b = file.find(m.begin);
  const auto after_begin = b == std::string::npos ? b : file.find('\n', b);
  const auto e = b == std::string::npos ? b : file.find(m.end, b);
  if (after_begin == std::string::npos || e == std::string::npos || e < after_begin) {
    return Error::bad_request("lacks the lines '" + std::string(m.begin) + "' and '" + std::string(m.end) +
                              "' (in that order)");
  }
  *out = file.substr(0, after_begin + 1) + block + file.substr(e);
  return {};
}

}  // namespace ferry::daemon
