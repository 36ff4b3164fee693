#include "report.h"

#include <cstdio>

namespace ferry::bench {

namespace {

std::string escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

void add(std::string& out, const char* key, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), ",\"%s\":%.3f", key, v);
  out += buf;
}

void add(std::string& out, const char* key, std::uint64_t v) {
  out += ",\"" + std::string(key) + "\":" + std::to_string(v);
}

void add(std::string& out, const char* key, bool v) {
  out += ",\"" + std::string(key) + "\":" + (v ? "true" : "false");
}

}  // namespace

void print_table_header() {
  std::printf("%-10s %9s %9s %10s %10s %10s %10s %11s %10s %10s %s\n", "scenario", "size", "ops", "mean_us", "p50_us",
              "p99_us", "p999_us", "ops/s", "MB/s", "cpu_us/op", "daemon_cpu");
}

void print_table_row(const SizeResult& r) {
  std::printf("%-10.*s %9zu %9llu %10.2f %10.2f %10.2f %10.2f %11.0f %10.1f %10.2f %s\n",
              static_cast<int>(r.scenario.size()), r.scenario.data(), r.size, static_cast<unsigned long long>(r.ops),
              r.latency.mean_us, r.latency.p50_us, r.latency.p99_us, r.latency.p999_us, r.ops_per_s,
              r.bytes_per_s / 1e6, r.cpu_us_per_op,
              r.cpu.daemon_included ? "included" : (r.cpu.daemon_involved ? "NOT included" : "-"));
}

std::string json_line(const SizeResult& r) {
  std::string out = "{\"scenario\":\"" + escape(r.scenario) + "\"";
  add(out, "size", std::uint64_t{r.size});
  add(out, "concurrency", std::uint64_t{r.concurrency});
  add(out, "ops", r.ops);
  add(out, "elapsed_s", r.elapsed_s);
  add(out, "mean_us", r.latency.mean_us);
  add(out, "min_us", r.latency.min_us);
  add(out, "p50_us", r.latency.p50_us);
  add(out, "p99_us", r.latency.p99_us);
  add(out, "p999_us", r.latency.p999_us);
  add(out, "max_us", r.latency.max_us);
  add(out, "ops_per_s", r.ops_per_s);
  add(out, "bytes_per_s", r.bytes_per_s);
  add(out, "cpu_us_per_op", r.cpu_us_per_op);
  add(out, "cpu_self_us", r.cpu.self_us);
  add(out, "cpu_servers_us", r.cpu.servers_us);
  add(out, "cpu_daemon_us", r.cpu.daemon_us);
  add(out, "daemon_cpu_included", r.cpu.daemon_included);
  add(out, "server_cpu_included", r.servers_charged);
  add(out, "verified_ops", r.verified_ops);
  out += "}";
  return out;
}

std::string json_error_line(std::string_view scenario, std::size_t size, std::string_view outcome,
                            const std::string& message) {
  return "{\"scenario\":\"" + escape(scenario) + "\",\"size\":" + std::to_string(size) + ",\"error\":\"" +
         escape(outcome) + "\",\"message\":\"" + escape(message) + "\"}";
}

}  // namespace ferry::bench
