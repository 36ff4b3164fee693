// ferryctl command dispatch. Commands the daemon may not implement yet
// (counters, peers, channels) fall back to the matching member of `status`;
// when that is missing too, the daemon's own error is printed.
#include "control/ferryctl_commands.h"

#include <chrono>
#include <cstdio>
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
std::string render_drain(const json::Value& v) { return "drain: " + json::dump(v) + "\n"; }

}  // namespace

int run_command(const Options& o) {
  switch (o.command) {
    case CtlCommand::Help: print(usage_text()); return kExitOk;
    case CtlCommand::Version: print("ferryctl " FERRY_VERSION "\n"); return kExitOk;
    case CtlCommand::Status:
      return show(o, control::call(o.control_path, Command::Status, timeout_of(o)), Command::Status, render_status);
    case CtlCommand::Clients:
      return show(o, control::call(o.control_path, Command::Clients, timeout_of(o)), Command::Clients, render_clients);
    case CtlCommand::Counters:
      return show(o, fetch_with_fallback(o, Command::Counters, "counters"), Command::Counters, render_counters);
    case CtlCommand::Peers:
      return show(o, fetch_with_fallback(o, Command::Peers, "peers"), Command::Peers, render_peers);
    case CtlCommand::Channels:
      return show(o, fetch_with_fallback(o, Command::Channels, "channels"), Command::Channels, render_channels);
    case CtlCommand::Drain:
      return show(o, control::call(o.control_path, Command::Drain, timeout_of(o)), Command::Drain, render_drain);
    case CtlCommand::Metrics: {
      CallResult r = control::call(o.control_path, Command::Status, timeout_of(o));
      if (!r.ok()) return fail(r, Command::Status);
      if (!r.result.is_object()) {
        std::fprintf(stderr, "ferryctl: status result is not an object\n");
        return kExitDaemon;
      }
      print(render_prometheus(r.result));
      return kExitOk;
    }
    case CtlCommand::Top: return run_top(o);
  }
  return kExitUsage;
}

}  // namespace ferry::ctl
