// ferryctl metrics: the Prometheus rendering of a fixed status object, with
// every line checked against the text exposition grammar (format 0.0.4).
#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "base/json.h"
#include "control/prometheus.h"

using namespace ferry;

namespace {

// A small checker for the exposition format: comment lines, TYPE before the
// family's samples and only once, valid names, label syntax and values.
// Returns "" when valid, else the first problem.
std::string check_exposition(const std::string& text, std::map<std::string, std::string>* samples) {
  if (text.empty() || text.back() != '\n') return "output must end with a newline";
  static const std::regex kName("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex kHelp("# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)");
  static const std::regex kType("# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)");
  static const std::regex kSample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*,?\})? ([-+]?([0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?|\.[0-9]+([eE][-+]?[0-9]+)?|Inf|NaN))( -?[0-9]+)?)");
  std::set<std::string> typed, helped, sampled_families;
  std::map<std::string, std::string> type_of;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::string where = "line " + std::to_string(n) + " '" + line + "': ";
    std::smatch m;
    if (line.rfind("# HELP ", 0) == 0) {
      if (!std::regex_match(line, m, kHelp)) return where + "bad HELP";
      if (!helped.insert(m[1]).second) return where + "second HELP for a family";
    } else if (line.rfind("# TYPE ", 0) == 0) {
      if (!std::regex_match(line, m, kType)) return where + "bad TYPE";
      if (!typed.insert(m[1]).second) return where + "second TYPE for a family";
      if (sampled_families.count(m[1]) != 0) return where + "TYPE after the family's samples";
      type_of[m[1]] = m[2];
    } else if (line.empty() || line[0] == '#') {
      continue;  // blank lines and other comments are allowed
    } else {
      if (!std::regex_match(line, m, kSample)) return where + "bad sample";
      const std::string name = m[1];
      if (typed.count(name) == 0) return where + "sample without a TYPE";
      if (type_of[name] == "counter" && (name.size() < 6 || name.substr(name.size() - 6) != "_total")) {
        return where + "counter not named *_total";
      }
      sampled_families.insert(name);
      const std::string value = m[7];
      (*samples)[line.substr(0, line.size() - value.size() - 1)] = value;
    }
  }
  return "";
}

json::Value fixed_status() {
  auto v = json::parse(R"({
    "version": "0.1.0", "uptime_s": 3723, "transport": "rdma", "clients": 2, "pid": 42,
    "cpu_user_us": 1500000, "cpu_sys_us": 250000,
    "peers": [{"addr": "198.18.0.2:7000", "state": "up"}, {"addr": "198.18.0.3:7000", "state": "down"}],
    "counters": {"rnr_naks": 0, "retransmits": 17, "recoveries": 1, "credit_stalls": 5,
                 "window_stalls": 2, "bytes.sent": 18446744073709551615, "rx_total": 9, "note": "x",
                 "peer_connections": 62, "receive_pool_borrowed": 7},
    "engines": [{"id": 0, "clients": 2, "lanes": 4, "peer_connections": 62, "busy_fraction": 0.25}]
  })");
  REQUIRE(v.has_value());
  return *v;
}

}  // namespace

TEST_CASE("prometheus: the checker rejects invalid exposition", "[prometheus]") {
  std::map<std::string, std::string> s;
  CHECK(check_exposition("# TYPE a counter\na_total 1\n", &s) != "");  // family name mismatch
  CHECK(check_exposition("# TYPE a gauge\na 1", &s) != "");            // no final newline
  CHECK(check_exposition("# TYPE a gauge\na{x=\"1} 1\n", &s) != "");
  CHECK(check_exposition("# TYPE a gauge\na{1x=\"1\"} 1\n", &s) != "");
  CHECK(check_exposition("# TYPE a gauge\na one\n", &s) != "");
  CHECK(check_exposition("# TYPE a gauge\n# TYPE a gauge\na 1\n", &s) != "");
  CHECK(check_exposition("# TYPE a gauge\na{x=\"q\\\"\"} 1.5e3\n", &s) == "");
}

TEST_CASE("prometheus: a fixed status renders valid, complete exposition", "[prometheus]") {
  const std::string text = ctl::render_prometheus(fixed_status());
  INFO(text);
  std::map<std::string, std::string> samples;
  REQUIRE(check_exposition(text, &samples) == "");
  CHECK(samples["ferry_info{version=\"0.1.0\",transport=\"rdma\"}"] == "1");
  CHECK(samples["ferry_uptime_seconds"] == "3723");
  CHECK(samples["ferry_clients"] == "2");
  CHECK(samples["ferry_peers"] == "2");
  CHECK(samples["ferry_cpu_seconds_total{mode=\"user\"}"] == "1.5");
  CHECK(samples["ferry_cpu_seconds_total{mode=\"system\"}"] == "0.25");
  for (const char* c : {"rnr_naks", "retransmits", "recoveries", "credit_stalls", "window_stalls"}) {
    CHECK(samples.count(std::string("ferry_") + c + "_total") == 1);
  }
  CHECK(samples["ferry_retransmits_total"] == "17");
  CHECK(samples["ferry_bytes_sent_total"] == "18446744073709551615");
  CHECK(samples["ferry_rx_total"] == "9");        // no doubled _total
  CHECK(text.find("note") == std::string::npos);  // non-numeric counters are skipped
  CHECK(text.find("# HELP ferry_retransmits_total ") != std::string::npos);
  CHECK(text.find("# TYPE ferry_retransmits_total counter\n") != std::string::npos);
}

TEST_CASE("prometheus: hostile strings stay valid", "[prometheus]") {
  json::Value s;
  s["version"] = "1\"2\\3\n4";
  s["transport"] = "tcp";
  s["clients"] = json::Array{json::Value(1), json::Value(2), json::Value(3)};
  s["counters"]["9 weird-name!"] = 4;
  s["counters"]["9_weird_name_"] = 5;  // sanitises to the same name: dropped
  s["counters"]["ratio"] = 0.5;
  const std::string text = ctl::render_prometheus(s);
  INFO(text);
  std::map<std::string, std::string> samples;
  REQUIRE(check_exposition(text, &samples) == "");
  CHECK(samples["ferry_info{version=\"1\\\"2\\\\3\\n4\",transport=\"tcp\"}"] == "1");
  CHECK(samples["ferry_clients"] == "3");
  CHECK(samples["ferry__9_weird_name__total"] == "4");
  CHECK(samples["ferry_ratio_total"] == "0.5");
  CHECK(samples.count("ferry_uptime_seconds") == 0);  // missing fields are not invented

  CHECK(ctl::sanitize_metric_name("") == "_");
  CHECK(ctl::sanitize_metric_name("a.b-c") == "a_b_c");
}

TEST_CASE("prometheus: levels among the counters are gauges, per engine too", "[prometheus]") {
  const std::string text = ctl::render_prometheus(fixed_status());
  INFO(text);
  std::map<std::string, std::string> samples;
  REQUIRE(check_exposition(text, &samples) == "");
  // A level that can fall is a gauge without _total (rate() of it would be wrong).
  CHECK(text.find("# TYPE ferry_peer_connections gauge\n") != std::string::npos);
  CHECK(samples["ferry_peer_connections"] == "62");
  CHECK(samples.count("ferry_peer_connections_total") == 0);
  CHECK(samples["ferry_receive_pool_borrowed"] == "7");
  CHECK(samples["ferry_engine_peer_connections{engine=\"0\"}"] == "62");
  CHECK(samples["ferry_engine_lanes{engine=\"0\"}"] == "4");
  CHECK(samples["ferry_retransmits_total"] == "17");  // counts stay counters
}
