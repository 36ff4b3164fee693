// ferry-bench's numbers: exact nearest-rank percentiles, the size parser
// and the --json line's shape.
#include <catch2/catch.hpp>

#include <vector>

#include "bench_options.h"
#include "latency_stats.h"
#include "report.h"

using namespace ferry::bench;

TEST_CASE("percentiles are exact nearest-rank values of the sorted samples") {
  std::vector<std::uint64_t> ns;
  for (std::uint64_t i = 1000; i >= 1; --i) ns.push_back(i * 1000);  // 1..1000 us, reversed
  const LatencySummary s = summarize(ns);
  CHECK(s.samples == 1000);
  CHECK(s.min_us == 1.0);
  CHECK(s.max_us == 1000.0);
  CHECK(s.p50_us == 500.0);
  CHECK(s.p99_us == 990.0);
  CHECK(s.p999_us == 999.0);
  CHECK(s.mean_us == Approx(500.5));
}

TEST_CASE("percentiles of tiny sample sets stay inside the samples") {
  std::vector<std::uint64_t> one{7000};
  const LatencySummary s = summarize(one);
  CHECK(s.p50_us == 7.0);
  CHECK(s.p999_us == 7.0);
  std::vector<std::uint64_t> none;
  CHECK(summarize(none).samples == 0);
  CHECK(percentile_sorted({1, 2, 3}, 0.0) == 1);
  CHECK(percentile_sorted({1, 2, 3}, 1.0) == 3);
}

TEST_CASE("one outlier in a hundred is p99, not p50") {
  std::vector<std::uint64_t> ns(100, 10000);
  ns[42] = 5000000;
  const LatencySummary s = summarize(ns);
  CHECK(s.p50_us == 10.0);
  CHECK(s.p99_us == 10.0);  // rank 99 of 100 is still a fast sample
  CHECK(s.max_us == 5000.0);
  CHECK(s.p999_us == 5000.0);
}

TEST_CASE("sizes accept binary suffixes and reject junk") {
  CHECK(parse_size("64") == 64u);
  CHECK(parse_size("4K") == 4096u);
  CHECK(parse_size("1M") == 1048576u);
  CHECK_FALSE(parse_size("0"));
  CHECK_FALSE(parse_size("x"));
  CHECK_FALSE(parse_size("-1"));
  const auto list = parse_size_list("64,4096,65536,1048576");
  REQUIRE(list);
  CHECK(*list == std::vector<std::size_t>{64, 4096, 65536, 1048576});
  CHECK_FALSE(parse_size_list("64,,4096"));
}

TEST_CASE("the json line carries the contract fields") {
  SizeResult r;
  r.scenario = "uds-rpc";
  r.size = 64;
  r.ops = 10;
  const std::string line = json_line(r);
  for (const char* key :
       {"\"scenario\":\"uds-rpc\"", "\"size\":64", "\"ops\":10", "\"mean_us\":", "\"p50_us\":", "\"p99_us\":",
        "\"p999_us\":", "\"cpu_us_per_op\":", "\"bytes_per_s\":", "\"daemon_cpu_included\":false"})
    CHECK(line.find(key) != std::string::npos);
  CHECK(line.front() == '{');
  CHECK(line.back() == '}');
}
