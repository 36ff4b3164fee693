// ferryctl command dispatch. Commands the daemon may not implement yet
// (counters, peers, channels) fall back to the matching member of `status`;
// when that is missing too, the daemon's own error is printed.
#include "control/ferryctl_commands.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>

#include "control/control_client.h"
#include "control/ferryctl_tables.h"
#include "control/ferryctl_top.h"
#include "control/prometheus.h"
#include "ferry_config.h"

namespace ferry::ctl {
namespace {

using control::CallResult;
using control::CallStatus;
using control::Command;

std::chrono::milliseconds timeout_of(const Options& o) {
  return std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000));
}

void print(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

int fail(const CallResult& r, Command c) {
  if (r.status == CallStatus::DaemonError) {
    std::fprintf(stderr, "ferryctl: %s: daemon error: %s\n", std::string(control::to_string(c)).c_str(),
                 r.error.c_str());
  } else {
    std::fprintf(stderr, "ferryctl: %s\n", r.error.c_str());
  }
  return kExitDaemon;
}

// Asks for `c`; when the daemon rejects it, takes status[member] instead.
CallResult fetch_with_fallback(const Options& o, Command c, std::string_view member) {
  CallResult r = control::call(o.control_path, c, timeout_of(o));
  if (r.status != CallStatus::DaemonError) return r;
  CallResult s = control::call(o.control_path, Command::Status, timeout_of(o));
  if (!s.ok()) return s;
  const json::Value* m = s.result.find(member);
  if (m == nullptr) return r;  // the daemon's original error explains best
  CallResult out;
  out.status = CallStatus::Ok;
  out.result = *m;
  return out;
}

int show(const Options& o, const CallResult& r, Command c, std::string (*render)(const json::Value&)) {
  if (!r.ok()) return fail(r, c);
  print(o.json ? json::dump(r.result) + "\n" : render(r.result));
  return kExitOk;
}

std::string render_peers(const json::Value& v) { return render_object_list(v, kPeerColumns, "no peers"); }
std::string render_channels(const json::Value& v) { return render_object_list(v, kChannelColumns, "no channels"); }

// Below a non-empty channel table: the daemon's channel churn (opened,
// evicted past max-channels, re-opened), from its status counters; nothing
// when the daemon does not report them.
std::string channel_churn(const Options& o) {
  CallResult s = control::call(o.control_path, Command::Status, timeout_of(o));
  const json::Value* c = s.ok() ? s.result.find("counters") : nullptr;
  if (c == nullptr) return {};
  std::string out = "channels:";
  const char* sep = " ";
  for (const auto& [name, label] : {std::pair{"channels_opened", "opened"}, std::pair{"channels_evicted", "evicted"},
                                    std::pair{"channels_reopened", "re-opened"}}) {
    const json::Value* v = c->find(name);
    if (v == nullptr || !v->as_int()) return {};
    out += sep + std::string(label) + " " + std::to_string(*v->as_int());
    sep = ", ";
  }
  return out + "\n";
}
std::string render_drain(const json::Value& v) { return "drain: " + json::dump(v) + "\n"; }
std::string render_resume(const json::Value& v) { return "resume: " + json::dump(v) + "\n"; }

// `metrics --json`: the same samples as the text exposition, as one object
// {"name{labels}": number}, so scripts need no Prometheus parser.
json::Value prometheus_samples(const std::string& text) {
  json::Object o;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    const std::string name = line.substr(0, sp), value = line.substr(sp + 1);
    std::int64_t i = 0;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), i);
    if (ec == std::errc{} && p == value.data() + value.size()) {
      o[name] = json::Value(i);
    } else {
      o[name] = json::Value(std::strtod(value.c_str(), nullptr));
    }
  }
  return json::Value(std::move(o));
}

}  // namespace

int run_command(const Options& o) {
  switch (o.command) {
    case CtlCommand::Help: print(usage_text()); return kExitOk;
    case CtlCommand::Version: print("ferryctl " FERRY_VERSION "\n"); return kExitOk;
    case CtlCommand::Status:
      return show(o, control::call(o.control_path, Command::Status, timeout_of(o)), Command::Status,
                  o.all ? render_status_all : render_status);
    case CtlCommand::Clients:
      return show(o, control::call(o.control_path, Command::Clients, timeout_of(o)), Command::Clients, render_clients);
    case CtlCommand::Counters:
      return show(o, fetch_with_fallback(o, Command::Counters, "counters"), Command::Counters, render_counters);
    case CtlCommand::Peers:
      return show(o, fetch_with_fallback(o, Command::Peers, "peers"), Command::Peers, render_peers);
    case CtlCommand::Channels: {
      const CallResult r = fetch_with_fallback(o, Command::Channels, "channels");
      if (!r.ok() || o.json) return show(o, r, Command::Channels, render_channels);
      const json::Array* rows = r.result.as_array();
      print(render_channels(r.result) + (rows != nullptr && !rows->empty() ? channel_churn(o) : std::string()));
      return kExitOk;
    }
    case CtlCommand::Drain:
      return show(o, control::call(o.control_path, Command::Drain, timeout_of(o)), Command::Drain, render_drain);
    case CtlCommand::Resume:
      return show(o, control::call(o.control_path, Command::Resume, timeout_of(o)), Command::Resume, render_resume);
    case CtlCommand::Metrics: {
      CallResult r = control::call(o.control_path, Command::Status, timeout_of(o));
      if (!r.ok()) return fail(r, Command::Status);
      if (!r.result.is_object()) {
        std::fprintf(stderr, "ferryctl: status result is not an object\n");
        return kExitDaemon;
      }
      const std::string text = render_prometheus(r.result);
      print(o.json ? json::dump(prometheus_samples(text)) + "\n" : text);
      return kExitOk;
    }
    case CtlCommand::Top: return run_top(o);
  }
  return kExitUsage;
}

}  // namespace ferry::ctl
