// Table rendering for ferryctl's human-readable output.
#include "control/ferryctl_tables.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

namespace ferry::ctl {
namespace {

bool looks_numeric(const std::string& s) {
  if (s.empty()) return false;
  std::size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (!(c >= '0' && c <= '9') && c != '.') return false;
  }
  return true;
}

bool is_scalar(const json::Value& v) { return !v.is_array() && !v.is_object(); }

}  // namespace

std::string format_table(const Row& headers, const std::vector<Row>& rows, std::string_view indent) {
  const std::size_t ncol = headers.size();
  std::vector<std::size_t> width(ncol, 0);
  std::vector<bool> numeric(ncol, !rows.empty());
  for (std::size_t c = 0; c < ncol; ++c) width[c] = headers[c].size();
  for (const Row& r : rows) {
    for (std::size_t c = 0; c < ncol; ++c) {
      const std::string& cell = c < r.size() ? r[c] : std::string();
      width[c] = std::max(width[c], cell.size());
      if (!looks_numeric(cell) && cell != "-") numeric[c] = false;
    }
  }
  std::string out;
  auto emit = [&](const Row& r, bool header) {
    std::string line(indent);
    for (std::size_t c = 0; c < ncol; ++c) {
      const std::string& cell = c < r.size() ? r[c] : std::string();
      const std::string pad(width[c] - cell.size(), ' ');
      const bool right = numeric[c] && !header;
      if (c > 0) line += "  ";
      line += right ? pad + cell : cell + (c + 1 < ncol ? pad : std::string());
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out.push_back('\n');
  };
  emit(headers, true);
  for (const Row& r : rows) emit(r, false);
  return out;
}

std::string cell_text(const json::Value& v) {
  if (v.is_null()) return "-";
  if (const std::string* s = v.as_string()) return *s;
  if (const json::Array* a = v.as_array()) {
    if (a->empty()) return "-";
    if (std::all_of(a->begin(), a->end(), is_scalar)) {
      std::string out;
      for (const json::Value& e : *a) {
        if (!out.empty()) out.push_back(',');
        out += cell_text(e);
      }
      return out;
    }
  }
  return json::dump(v);
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  std::size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string format_duration(std::int64_t seconds) {
  if (seconds < 0) seconds = 0;
  const std::int64_t d = seconds / 86400, h = seconds / 3600 % 24, m = seconds / 60 % 60, s = seconds % 60;
  char buf[64];
  if (d > 0) {
    std::snprintf(buf, sizeof buf, "%lldd %02lldh %02lldm %02llds", static_cast<long long>(d),
                  static_cast<long long>(h), static_cast<long long>(m), static_cast<long long>(s));
  } else if (h > 0) {
    std::snprintf(buf, sizeof buf, "%lldh %02lldm %02llds", static_cast<long long>(h), static_cast<long long>(m),
                  static_cast<long long>(s));
  } else if (m > 0) {
    std::snprintf(buf, sizeof buf, "%lldm %02llds", static_cast<long long>(m), static_cast<long long>(s));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  }
  return buf;
}

std::string render_object_list(const json::Value& list, const std::vector<std::string>& preferred,
                               std::string_view empty, std::string_view indent) {
  const json::Array* a = list.as_array();
  if (a == nullptr) return std::string(indent) + cell_text(list) + "\n";
  if (a->empty()) return std::string(indent) + std::string(empty) + "\n";
  std::set<std::string> keys;
  for (const json::Value& e : *a) {
    if (const json::Object* o = e.as_object()) {
      for (const auto& [k, unused] : *o) keys.insert(k);
    }
  }
  std::vector<std::string> cols;
  for (const std::string& p : preferred) {
    if (keys.erase(p) > 0) cols.push_back(p);
  }
  cols.insert(cols.end(), keys.begin(), keys.end());
  if (cols.empty()) cols.push_back("value");  // an array of scalars
  Row headers;
  for (const std::string& c : cols) {
    std::string h = c;
    std::transform(h.begin(), h.end(), h.begin(), [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
    headers.push_back(h);
  }
  std::vector<Row> rows;
  for (const json::Value& e : *a) {
    Row r;
    if (e.is_object()) {
      for (const std::string& c : cols) {
        const json::Value* f = e.find(c);
        r.push_back(f == nullptr ? "-" : cell_text(*f));
      }
    } else {
      r.push_back(cell_text(e));
    }
    rows.push_back(std::move(r));
  }
  return format_table(headers, rows, indent);
}

std::string render_clients(const json::Value& clients) {
  const json::Array* a = clients.as_array();
  if (a == nullptr) return cell_text(clients) + "\n";
  if (a->empty()) return "no clients\n";
  static const std::vector<std::string> kCols{"id", "pid", "uid", "name", "memory", "endpoints", "services"};
  Row headers{"ID", "PID", "UID", "NAME", "MEMORY", "ENDPOINTS", "SERVICES"};
  std::vector<Row> rows;
  for (const json::Value& e : *a) {
    Row r;
    for (const std::string& c : kCols) {
      const json::Value* f = e.find(c);
      if (f == nullptr) {
        r.push_back("-");
      } else if (c == "memory" && f->as_uint()) {
        r.push_back(format_bytes(*f->as_uint()));
      } else {
        r.push_back(cell_text(*f));
      }
    }
    rows.push_back(std::move(r));
  }
  return format_table(headers, rows);
}

std::string render_counters(const json::Value& counters) {
  const json::Object* o = counters.as_object();
  if (o == nullptr) return cell_text(counters) + "\n";
  if (o->empty()) return "no counters\n";
  std::vector<Row> rows;
  for (const auto& [k, v] : *o) rows.push_back(Row{k, cell_text(v)});
  return format_table(Row{"COUNTER", "VALUE"}, rows);
}

std::string_view counter_group(std::string_view n) noexcept {
  auto starts = [&](std::string_view p) { return n.substr(0, p.size()) == p; };
  if (starts("engine_") || starts("spin_") || n == "corrupt_rings" || n == "cq_overflows") return "engine";
  if (starts("rdma_") || starts("rendezvous_") || starts("key_windows") || n == "split_reads" ||
      n == "eager_responses" || starts("receive_pool")) {
    return "rdma and receive credits";
  }
  if (n == "rnr_naks" || n == "retransmits" || n == "recoveries" || n == "credit_stalls" || n == "window_stalls" ||
      n == "reply_stalls" || n == "answer_stalls" || n == "staged" || n == "busy_rejects" || n == "lane_rebuilds") {
    return "flow control and recovery";
  }
  if (starts("peer_") || starts("remote_") || starts("channel") || n == "heartbeats_missed") return "peers";
  return "clients and operations";
}

namespace {

std::string status_text(const json::Value& status, bool all) {
  auto text = [&](std::string_view key) {
    const json::Value* v = status.find(key);
    return v == nullptr ? std::string("-") : cell_text(*v);
  };
  std::string out;
  out += "version:    " + text("version") + "\n";
  const json::Value* up = status.find("uptime_s");
  out += "uptime:     " + (up != nullptr && up->as_int() ? format_duration(*up->as_int()) : text("uptime_s")) + "\n";
  out += "transport:  " + text("transport") + "\n";
  if (status.find("listen") != nullptr) out += "listen:     " + text("listen") + "\n";
  if (status.find("pid") != nullptr) out += "pid:        " + text("pid") + "\n";
  if (status.find("epoch") != nullptr) out += "epoch:      " + text("epoch") + "\n";
  if (const json::Value* d = status.find("draining"); d != nullptr && d->as_bool() == true) {
    out += "state:      draining\n";
  }
  const json::Value* clients = status.find("clients");
  const json::Array* client_list = clients == nullptr ? nullptr : clients->as_array();
  out += "clients:    " + (client_list != nullptr ? std::to_string(client_list->size()) : text("clients")) + "\n";
  const json::Value* user = status.find("cpu_user_us");
  const json::Value* sys = status.find("cpu_sys_us");
  if (user != nullptr && sys != nullptr && user->as_double() && sys->as_double()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3fs user, %.3fs sys", *user->as_double() / 1e6, *sys->as_double() / 1e6);
    out += std::string("cpu:        ") + buf + "\n";
  }
  if (std::string engines = render_engines(status); !engines.empty()) out += "\nengines:\n" + engines;
  out += "\npeers:\n";
  const json::Value* peers = status.find("peers");
  const json::Array* pa = peers == nullptr ? nullptr : peers->as_array();
  if (pa == nullptr || pa->empty()) {
    out += "  no peers\n";
  } else {
    // A line each (ferryctl peers has every column).
    std::vector<Row> rows;
    for (const json::Value& p : *pa) {
      auto cell = [&](std::string_view k) {
        const json::Value* v = p.find(k);
        return v == nullptr ? std::string("-") : cell_text(*v);
      };
      rows.push_back(Row{cell("addr"), cell("engine"), cell("state"), cell("qps"), cell("rtt_us"), cell("endpoints"),
                         cell("window_stalls"), cell("rnr_naks")});
    }
    out += format_table(Row{"ADDR", "ENGINE", "STATE", "QPS", "RTT_US", "ENDPOINTS", "WINDOW_STALLS", "RNR_NAKS"}, rows,
                        "  ");
  }
  const json::Value* counters = status.find("counters");
  const json::Object* co = counters == nullptr ? nullptr : counters->as_object();
  if (co == nullptr || co->empty()) return out + "\ncounters:\n  no counters\n";
  // Grouped, in a fixed order; without --all only those that moved.
  static constexpr std::string_view kGroups[] = {"clients and operations", "engine", "peers",
                                                 "flow control and recovery", "rdma and receive credits"};
  std::size_t hidden = 0;
  for (std::string_view g : kGroups) {
    std::vector<Row> rows;
    for (const auto& [k, v] : *co) {
      if (counter_group(k) != g) continue;
      if (!all && v.as_uint() == std::optional<std::uint64_t>(0)) {
        ++hidden;
        continue;
      }
      rows.push_back(Row{k, cell_text(v)});
    }
    if (rows.empty()) continue;
    out += "\n" + std::string(g) + ":\n" + format_table(Row{"COUNTER", "VALUE"}, rows, "  ");
  }
  if (hidden != 0) out += "\n(" + std::to_string(hidden) + " counters at 0 not shown; --all lists them)\n";
  return out;
}

}  // namespace

std::string render_engines(const json::Value& status, std::string_view indent) {
  const json::Value* engines = status.find("engines");
  const json::Array* a = engines == nullptr ? nullptr : engines->as_array();
  if (a == nullptr || a->empty()) return {};
  std::vector<Row> rows;
  for (const json::Value& e : *a) {
    auto cell = [&](std::string_view k) {
      const json::Value* v = e.find(k);
      return v == nullptr || v->is_null() ? std::string("-") : cell_text(*v);
    };
    std::string busy = "-";
    if (const json::Value* b = e.find("busy_fraction"); b != nullptr && b->as_double()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.0f%%", *b->as_double() * 100);
      busy = buf;
    }
    rows.push_back(Row{cell("id"), cell("thread"), cell("cpu"), cell("clients"), cell("lanes"),
                       cell("peer_connections"), cell("msgs_per_s"), busy, cell("cross_engine_in"),
                       cell("cross_engine_out")});
  }
  return format_table(
      Row{"ENGINE", "THREAD", "CPU", "CLIENTS", "LANES", "PEER CONNS", "MSGS/S", "BUSY", "CROSS IN", "CROSS OUT"}, rows,
      indent);
}

std::string render_status(const json::Value& status) { return status_text(status, false); }
std::string render_status_all(const json::Value& status) { return status_text(status, true); }

}  // namespace ferry::ctl
