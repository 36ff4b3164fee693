// Prometheus rendering of a status result.
#include "control/prometheus.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace ferry::ctl {
namespace {

// A number's sample text into `out`; false (out untouched) when `v` is not
// a number: such a field has no sample.
[[nodiscard]] bool sample_value(const json::Value& v, std::string& out) {
  if (auto i = v.as_int()) {
    out = std::to_string(*i);
  } else if (auto u = v.as_uint()) {
    out = std::to_string(*u);
  } else if (auto d = v.as_double()) {
    if (std::isnan(*d)) {
      out = "NaN";
    } else if (std::isinf(*d)) {
      out = *d > 0 ? "+Inf" : "-Inf";
    } else {
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, *d);
      if (ec != std::errc{}) return false;
      out.assign(buf, end);
    }
  } else {
    return false;
  }
  return true;
}

std::string cell_id(const json::Value& v) {
  if (auto u = v.as_uint()) return std::to_string(*u);
  return "?";
}

void family(std::string& out, const std::string& name, std::string_view type, std::string_view help) {
  out += "# HELP " + name + " ";
  out += help;  // help text is ours: no backslashes or newlines to escape
  out += "\n# TYPE " + name + " ";
  out += type;
  out += "\n";
}

void gauge_from(std::string& out, const json::Value& status, std::string_view key, const std::string& name,
                std::string_view help) {
  const json::Value* v = status.find(key);
  if (v == nullptr) return;
  std::string value;
  if (const json::Array* a = v->as_array()) {
    value = std::to_string(a->size());  // a list counts its members
  } else if (!sample_value(*v, value)) {
    return;
  }
  family(out, name, "gauge", help);
  out += name + " " + value + "\n";
}

// The status "counters" that are levels, not counts: exposed as gauges
// (no _total), so that rate() is never asked of a value that falls.
bool is_gauge(std::string_view key) noexcept {
  static constexpr std::string_view kGauges[] = {
      "peer_connections",           "receive_pool",
      "receive_pool_borrowed",      "receive_pool_borrowed_max",
      "rdma_recv_registered_bytes", "rdma_send_registered_bytes",
      "engine_turn_max_us",
  };
  return std::find(std::begin(kGauges), std::end(kGauges), key) != std::end(kGauges);
}

// One sample per engine of each of its numbers, labelled engine="ID".
void engine_samples(std::string& out, const json::Value& status) {
  const json::Value* engines = status.find("engines");
  const json::Array* a = engines == nullptr ? nullptr : engines->as_array();
  if (a == nullptr || a->empty()) return;
  struct Metric {
    std::string_view key, name, type, help;
  };
  static constexpr Metric kMetrics[] = {
      {"clients", "ferry_engine_clients", "gauge", "Clients placed on the engine."},
      {"lanes", "ferry_engine_lanes", "gauge", "Data lanes (QPs or TCP connections) the engine owns."},
      {"peer_connections", "ferry_engine_peer_connections", "gauge",
       "TCP connections to and from peer daemons the engine holds now (of peer-max-connections)."},
      {"msgs_per_s", "ferry_engine_messages_per_second", "gauge",
       "Client ops completed plus peers' messages delivered by the engine, per second (last second)."},
      {"busy_fraction", "ferry_engine_busy_ratio", "gauge",
       "Share of the last second the engine spent in turns that did work."},
      {"cross_engine_in", "ferry_engine_cross_in_total", "counter", "Messages the engine took from other engines."},
      {"cross_engine_out", "ferry_engine_cross_out_total", "counter", "Messages the engine handed to other engines."},
      {"thread", "ferry_engine_thread", "gauge",
       "The engine whose thread runs this engine's turns (its own id, or 0 while engine 0's thread runs it)."},
  };
  for (const Metric& m : kMetrics) {
    family(out, std::string(m.name), m.type, m.help);
    for (const json::Value& e : *a) {
      const json::Value* id = e.find("id");
      const json::Value* v = e.find(m.key);
      std::string value;
      if (id == nullptr || v == nullptr || !sample_value(*v, value)) continue;
      out += std::string(m.name) + "{engine=\"" + escape_label_value(cell_id(*id)) + "\"} " + value + "\n";
    }
  }
}

}  // namespace

std::string sanitize_metric_name(std::string_view name) {
  std::string out;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    out.push_back(ok ? c : '_');
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out.insert(out.begin(), '_');
  return out;
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string render_prometheus(const json::Value& status) {
  std::string out;
  auto text = [&](std::string_view key) {
    const json::Value* v = status.find(key);
    const std::string* s = v == nullptr ? nullptr : v->as_string();
    return s == nullptr ? std::string("unknown") : *s;
  };
  family(out, "ferry_info", "gauge", "Version and transport of the running ferryd; always 1.");
  out += "ferry_info{version=\"" + escape_label_value(text("version")) + "\",transport=\"" +
         escape_label_value(text("transport")) + "\"} 1\n";
  gauge_from(out, status, "uptime_s", "ferry_uptime_seconds", "Seconds since ferryd started.");
  gauge_from(out, status, "clients", "ferry_clients", "Client processes attached to ferryd.");
  gauge_from(out, status, "peers", "ferry_peers", "Peer daemons known to ferryd.");

  const json::Value* user = status.find("cpu_user_us");
  const json::Value* sys = status.find("cpu_sys_us");
  if (user != nullptr && sys != nullptr && user->as_double() && sys->as_double()) {
    family(out, "ferry_cpu_seconds_total", "counter", "CPU time consumed by ferryd, by mode.");
    for (auto [mode, v] : {std::pair{"user", user}, std::pair{"system", sys}}) {
      std::string seconds = "NaN";  // a double always has a sample text; NaN keeps the line valid regardless
      (void)sample_value(json::Value(*v->as_double() / 1e6), seconds);
      out += std::string("ferry_cpu_seconds_total{mode=\"") + mode + "\"} " + seconds + "\n";
    }
  }

  engine_samples(out, status);

  const json::Value* counters = status.find("counters");
  if (const json::Object* o = counters == nullptr ? nullptr : counters->as_object()) {
    for (const auto& [key, v] : *o) {
      std::string value;
      if (!sample_value(v, value)) continue;
      std::string name = "ferry_" + sanitize_metric_name(key);
      const bool gauge = is_gauge(key);
      // Sanitising can map two keys to one name: a second family with the
      // same name would be invalid exposition, so later ones are dropped.
      if (!gauge && (name.size() < 6 || name.compare(name.size() - 6, 6, "_total") != 0)) name += "_total";
      if (out.find("# TYPE " + name + " ") != std::string::npos) continue;
      family(out, name, gauge ? "gauge" : "counter",
             std::string(gauge ? "ferryd gauge " : "ferryd counter ") + sanitize_metric_name(key) + ".");
      out += name + " " + value + "\n";
    }
  }
  return out;
}

}  // namespace ferry::ctl
