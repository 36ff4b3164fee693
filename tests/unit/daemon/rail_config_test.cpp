// --device lists (daemon/rails/rail_config.h) against a fake sysfs tree, and
// the rail choice of a lane (pick_rail, RailSet::pick).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/rails/rail_config.h"

namespace fs = std::filesystem;
using namespace ferry::daemon::rails;
using ferry::Error;
using ferry::Status;

namespace {

struct FakeSysfs {
  fs::path root;
  FakeSysfs() {
    root = fs::temp_directory_path() / ("ferry-rails-" + std::to_string(getpid()));
    fs::remove_all(root);
    // mlx5_0: a link-local GID, then 198.18.0.1 (v1 and v2); mlx5_1:
    // 198.18.1.1 v2; mlx5_2: only a RoCE v1 IPv4 GID (not usable).
    add("mlx5_0", 0, "fe80:0000:0000:0000:0000:00ff:fe00:0001", "RoCE v2");
    add("mlx5_0", 1, "0000:0000:0000:0000:0000:ffff:c612:0001", "IB/RoCE v1");
    add("mlx5_0", 2, "0000:0000:0000:0000:0000:ffff:c612:0001", "RoCE v2");
    add("mlx5_1", 0, "0000:0000:0000:0000:0000:ffff:c612:0101", "RoCE v2");
    add("mlx5_1", 1, "0000:0000:0000:0000:0000:ffff:c612:0109", "RoCE v2");
    add("mlx5_2", 0, "0000:0000:0000:0000:0000:ffff:c612:0201", "IB/RoCE v1");
  }
  ~FakeSysfs() { fs::remove_all(root); }
  void add(const std::string& dev, int i, const char* gid, const char* type) {
    const fs::path port = root / "class/infiniband" / dev / "ports/1";
    fs::create_directories(port / "gids");
    fs::create_directories(port / "gid_attrs/types");
    std::ofstream(port / "gids" / std::to_string(i)) << gid << "\n";
    std::ofstream(port / "gid_attrs/types" / std::to_string(i)) << type << "\n";
  }
  std::string path() const { return root.string(); }
};

}  // namespace

TEST_CASE("roce_v2_ipv4 lists a device's IPv4 RoCE v2 addresses in table order") {
  FakeSysfs fs;
  CHECK(roce_v2_ipv4(fs.path(), "mlx5_0") == std::vector<std::string>{"198.18.0.1"});
  CHECK(roce_v2_ipv4(fs.path(), "mlx5_1") == std::vector<std::string>{"198.18.1.1", "198.18.1.9"});
  CHECK(roce_v2_ipv4(fs.path(), "mlx5_2").empty());
  CHECK(roce_v2_ipv4(fs.path(), "nope").empty());
}

TEST_CASE("one device or none: one rail, as before") {
  FakeSysfs fs;
  std::vector<RailSpec> r;
  REQUIRE(resolve_rails("", "198.18.0.1", fs.path(), r).ok());
  REQUIRE(r.size() == 1);
  CHECK(r[0].device.empty());
  CHECK(r[0].address == "198.18.0.1");
  REQUIRE(resolve_rails("mlx5_1@198.18.1.9", "198.18.0.1", fs.path(), r).ok());
  CHECK(r[0].device == "mlx5_1");
  CHECK(r[0].address == "198.18.1.9");
  const Error bad = resolve_rails("mlx5_1@nonsense", "198.18.0.1", fs.path(), r);
  CHECK(bad.status() == Status::BadRequest);
  CHECK(bad.message().find("not a numeric IPv4") != std::string::npos);
}

TEST_CASE("a list: a rail per device, the --listen one first, addresses from the GID table") {
  FakeSysfs fs;
  std::vector<RailSpec> r;
  REQUIRE(resolve_rails("mlx5_1,mlx5_0", "198.18.0.1", fs.path(), r).ok());
  REQUIRE(r.size() == 2);
  CHECK(r[0].device == "mlx5_0");  // carries --listen: rail 0
  CHECK(r[0].address == "198.18.0.1");
  CHECK(r[1].device == "mlx5_1");
  CHECK(r[1].address == "198.18.1.1");  // its first IPv4 RoCE v2 GID
  REQUIRE(resolve_rails("mlx5_0,mlx5_1@198.18.1.9", "198.18.0.1", fs.path(), r).ok());
  CHECK(r[1].address == "198.18.1.9");
}

TEST_CASE("all: every device with an IPv4 RoCE v2 GID") {
  FakeSysfs fs;
  std::vector<RailSpec> r;
  REQUIRE(resolve_rails("all", "198.18.1.1", fs.path(), r).ok());
  REQUIRE(r.size() == 2);  // mlx5_2 has no RoCE v2 IPv4 GID
  CHECK(r[0].device == "mlx5_1");
  CHECK(r[1].device == "mlx5_0");
}

TEST_CASE("bad lists are refused with a reason") {
  FakeSysfs fs;
  std::vector<RailSpec> r;
  auto why = [&](std::string_view opt) { return resolve_rails(opt, "198.18.0.1", fs.path(), r).message(); };
  CHECK(why("mlx5_0,").find("empty name") != std::string::npos);
  CHECK(why("mlx5_0,mlx5_0").find("twice") != std::string::npos);
  CHECK(why("mlx5_0,mlx5_2").find("mlx5_2 has no IPv4 RoCE v2 GID") != std::string::npos);
  CHECK(why("mlx5_0,mlx5_1,a@1.1.1.1,b@1.1.1.2,c@1.1.1.3").find("at most 4") != std::string::npos);
}

TEST_CASE("pick_rail: lane i on the i-th rail that is up; failed dials move on") {
  const std::array<bool, 4> all{true, true, false, false};
  CHECK(pick_rail(all, 2, 0, 0) == 0);
  CHECK(pick_rail(all, 2, 1, 0) == 1);
  CHECK(pick_rail(all, 2, 2, 0) == 0);
  CHECK(pick_rail(all, 2, 1, 1) == 0);  // lane 1's dial failed once: the next rail
  const std::array<bool, 4> one_down{false, true, false, false};
  CHECK(pick_rail(one_down, 2, 0, 0) == 1);
  CHECK(pick_rail(one_down, 2, 1, 0) == 1);
  const std::array<bool, 4> none{false, false, false, false};
  CHECK(pick_rail(none, 2, 0, 0) == 2);  // none is up: count
}

TEST_CASE("lane_rail_slot: channels of one lane spread over the rails; a lane per rail keeps lane i on rail i") {
  const std::array<bool, 4> two{true, true, false, false};
  // One lane per channel, two rails: consecutive channels alternate.
  std::array<int, 2> used{};
  for (std::uint32_t channel = 1; channel <= 10; ++channel) {
    ++used[pick_rail(two, 2, lane_rail_slot(0, 1, channel, 2), 0)];
  }
  CHECK(used[0] == 5);
  CHECK(used[1] == 5);
  // As many lanes as rails (or more): lane i on rail i whatever the channel.
  for (std::uint32_t channel = 1; channel <= 4; ++channel) {
    CHECK(pick_rail(two, 2, lane_rail_slot(0, 2, channel, 2), 0) == 0);
    CHECK(pick_rail(two, 2, lane_rail_slot(1, 2, channel, 2), 0) == 1);
  }
  // One rail: nothing to spread.
  CHECK(lane_rail_slot(0, 1, 7, 1) == 0);
  // A rail down: every channel's lane on the one that is up.
  const std::array<bool, 4> one_down{true, false, false, false};
  CHECK(pick_rail(one_down, 2, lane_rail_slot(0, 1, 3, 2), 0) == 0);
}
