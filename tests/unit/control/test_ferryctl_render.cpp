// ferryctl's option parsing and human-readable renderers.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "base/json.h"
#include "control/ferryctl_options.h"
#include "control/ferryctl_tables.h"
#include "control/ferryctl_top.h"

using namespace ferry;
using namespace ferry::ctl;

namespace {
json::Value j(std::string_view text) {
  auto v = json::parse(text);
  REQUIRE(v.has_value());
  return *v;
}
}  // namespace

TEST_CASE("ferryctl options: commands, options in any order, usage errors", "[ferryctl]") {
  auto p = parse_options({"--control", "/s", "status", "--json"});
  REQUIRE(p.options.has_value());
  CHECK(p.options->command == CtlCommand::Status);
  CHECK(p.options->control_path == "/s");
  CHECK(p.options->json);

  p = parse_options({"top", "--count=3", "--interval", "0.5", "--control=/t"});
  REQUIRE(p.options.has_value());
  CHECK(p.options->command == CtlCommand::Top);
  CHECK(p.options->count == 3);
  CHECK(p.options->interval_s == 0.5);
  CHECK(p.options->control_path == "/t");

  CHECK(parse_options({"--help"}).options->command == CtlCommand::Help);
  CHECK(parse_options({"help"}).options->command == CtlCommand::Help);
  CHECK(parse_options({"status", "--help"}).options->command == CtlCommand::Help);
  CHECK(parse_options({"--version"}).options->command == CtlCommand::Version);
  CHECK(parse_options({"drain"}).options->command == CtlCommand::Drain);
  CHECK(parse_options({"resume", "-c", "/r"}).options->command == CtlCommand::Resume);
  CHECK(parse_options({"-c", "/r", "resume"}).options->control_path == "/r");

  for (std::vector<std::string> bad : {
           std::vector<std::string>{},
           {"--json"},
           {"frob"},
           {"status", "clients"},
           {"status", "--bogus"},
           {"status", "--control"},
           {"top", "--count", "0"},
           {"top", "--count", "x"},
           {"top", "--interval", "-1"},
           {"top", "--interval"},
           {"status", "--json=1"},
           {"status", "--cont", "/x"},  // a prefix is not taken for --control
           {"status", "--timeout", "0"},
       }) {
    auto r = parse_options(bad);
    CHECK_FALSE(r.options.has_value());
    CHECK_FALSE(r.error.empty());
  }
}

TEST_CASE("ferryctl options: default control path comes from the environment", "[ferryctl]") {
  ::setenv("FERRY_CONTROL", "/env/control.sock", 1);
  CHECK(parse_options({"status"}).options->control_path == "/env/control.sock");
  ::unsetenv("FERRY_CONTROL");
  ::setenv("FERRY_SOCKET", "/rt/ferryd.sock", 1);
  CHECK(parse_options({"status"}).options->control_path == "/rt/control.sock");
  ::unsetenv("FERRY_SOCKET");
  CHECK(parse_options({"status"}).options->control_path == "/run/ferry/control.sock");
}

TEST_CASE("ferryctl tables: alignment, cells, units", "[ferryctl]") {
  CHECK(format_table({"NAME", "N"}, {{"a", "1"}, {"long", "100"}}) == "NAME  N\na       1\nlong  100\n");
  CHECK(cell_text(json::Value(nullptr)) == "-");
  CHECK(cell_text(j(R"(["kv","ps"])")) == "kv,ps");
  CHECK(cell_text(j(R"({"a":1})")) == R"({"a":1})");
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(64ull << 20) == "64.0 MiB");
  CHECK(format_duration(42) == "42s");
  CHECK(format_duration(3723) == "1h 02m 03s");
  CHECK(format_duration(90061) == "1d 01h 01m 01s");
}

TEST_CASE("ferryctl renderers: status, clients, peers, counters", "[ferryctl]") {
  const auto status = j(R"({"version":"0.1.0","uptime_s":65,"transport":"tcp","clients":0,"peers":[],
                            "counters":{"rnr_naks":0,"retransmits":12}})");
  const std::string s = render_status(status);
  CHECK(s.find("version:    0.1.0\n") != std::string::npos);
  CHECK(s.find("uptime:     1m 05s\n") != std::string::npos);
  CHECK(s.find("transport:  tcp\n") != std::string::npos);
  CHECK(s.find("no peers") != std::string::npos);
  CHECK(s.find("retransmits     12") != std::string::npos);

  const std::string c = render_clients(j(R"([{"id":1,"pid":10,"uid":0,"name":"w","memory":1024,"endpoints":2,
                                              "services":["kv"]}])"));
  CHECK(c == "ID  PID  UID  NAME  MEMORY   ENDPOINTS  SERVICES\n 1   10    0  w     1.0 KiB          2  kv\n");
  CHECK(render_clients(j("[]")) == "no clients\n");
  CHECK(render_object_list(j("[]"), kPeerColumns, "no peers") == "no peers\n");
  const std::string p =
      render_object_list(j(R"([{"state":"up","addr":"198.18.0.2:1","zeta":1}])"), kPeerColumns, "no peers");
  CHECK(p == "ADDR          STATE  ZETA\n198.18.0.2:1  up        1\n");
  CHECK(render_counters(j(R"({"b":2,"a":1})")) == "COUNTER  VALUE\na            1\nb            2\n");
}

TEST_CASE("ferryctl top: rates from two samples", "[ferryctl]") {
  const auto a = j(R"({"uptime_s":1,"counters":{"x":100,"y":5},"cpu_user_us":0,"cpu_sys_us":0})");
  const auto b = j(R"({"uptime_s":3,"counters":{"x":300,"y":5},"cpu_user_us":500000,"cpu_sys_us":500000})");
  const auto first = top_json(nullptr, a, 0);
  CHECK(first.find("rates") == nullptr);
  const auto second = top_json(&a, b, 2.0);
  CHECK(second.find("rates")->find("x")->as_double() == 100.0);
  CHECK(second.find("rates")->find("y")->as_double() == 0.0);
  CHECK(second.find("cpu_percent")->as_double() == 50.0);
  const std::string frame = render_top_frame(&a, b, 2.0, 2.0);
  CHECK(frame.find("\nx          300   100.0\n") != std::string::npos);
  CHECK(frame.find("cpu 50.0%") != std::string::npos);
}
