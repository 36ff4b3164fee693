// GID selection (transport/rdma/gid.cpp): against a fake sysfs tree here,
// and against the real rxe devices when the VM suite provides them.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "transport/rdma/gid.h"

namespace fs = std::filesystem;
using namespace ferry;
using namespace ferry::transport::rdma;

namespace {

struct FakeSysfs {
  fs::path root;
  FakeSysfs() {
    root = fs::temp_directory_path() / ("ferry-gid-" + std::to_string(getpid()));
    fs::remove_all(root);
    const fs::path port = root / "class/infiniband/fake0/ports/1";
    fs::create_directories(port / "gids");
    fs::create_directories(port / "gid_attrs/types");
    fs::create_directories(port / "gid_attrs/ndevs");
    auto put = [&](int i, const char* gid, const char* type, const char* ndev) {
      std::ofstream(port / "gids" / std::to_string(i)) << gid << "\n";
      if (type) std::ofstream(port / "gid_attrs/types" / std::to_string(i)) << type << "\n";
      if (ndev) std::ofstream(port / "gid_attrs/ndevs" / std::to_string(i)) << ndev << "\n";
    };
    put(0, "fe80:0000:0000:0000:0000:00ff:fe00:0001", "IB/RoCE v1", "eth9");
    put(1, "fe80:0000:0000:0000:0000:00ff:fe00:0001", "RoCE v2", "eth9");
    put(2, "0000:0000:0000:0000:0000:ffff:c612:0005", "IB/RoCE v1", "eth9");  // v1 of the address
    put(3, "0000:0000:0000:0000:0000:ffff:c612:0005", "RoCE v2", "eth9");
    put(4, "0000:0000:0000:0000:0000:0000:0000:0000", nullptr, nullptr);  // empty entry
  }
  ~FakeSysfs() { fs::remove_all(root); }
};

}  // namespace

TEST_CASE("gid: IPv4-mapped GID text matches sysfs formatting", "[rdma][gid]") {
  CHECK(ipv4_mapped_gid("198.18.0.1").value == "0000:0000:0000:0000:0000:ffff:c612:0001");
  CHECK(ipv4_mapped_gid("not an address").status == Status::BadRequest);
}

TEST_CASE("gid: picks the RoCE v2 entry of the address, honours and checks the override", "[rdma][gid]") {
  FakeSysfs sys;
  auto g = select_gid(sys.root.string(), "fake0", 1, "198.18.0.5", -1);
  REQUIRE(g.status == Status::Ok);
  CHECK(g.value.index == 3);  // not 2: that one is RoCE v1
  CHECK(g.value.netdev == "eth9");
  CHECK(g.value.reason.find("198.18.0.5") != std::string::npos);

  CHECK(select_gid(sys.root.string(), "fake0", 1, "198.18.0.6", -1).status == Status::NotSupported);
  CHECK(select_gid(sys.root.string(), "fake0", 1, "bogus", -1).status == Status::BadRequest);

  auto o = select_gid(sys.root.string(), "fake0", 1, "198.18.0.5", 1);
  REQUIRE(o.status == Status::Ok);
  CHECK(o.value.index == 1);
  CHECK(o.value.reason.find("override") != std::string::npos);
  CHECK(select_gid(sys.root.string(), "fake0", 1, "198.18.0.5", 4).status == Status::BadRequest);  // zero GID
  CHECK(select_gid(sys.root.string(), "fake0", 1, "198.18.0.5", 9).status == Status::BadRequest);  // missing
}

TEST_CASE("gid: on the VM's rxe devices the address maps to GID_INDEX", "[rdma][gid]") {
  const char* rxe0 = std::getenv("RXE0");
  const char* addr0 = std::getenv("ADDR0");
  const char* idx = std::getenv("GID_INDEX");
  if (rxe0 == nullptr || addr0 == nullptr || idx == nullptr ||
      !fs::exists(std::string("/sys/class/infiniband/") + rxe0)) {
    WARN("no rxe device (not in the Soft-RoCE VM): real-sysfs GID check skipped");
    return;
  }
  auto g = select_gid("/sys", rxe0, 1, addr0, -1);
  REQUIRE(g.status == Status::Ok);
  CHECK(g.value.index == std::atoi(idx));
  CHECK(g.value.type == "RoCE v2");
  CHECK(g.value.gid == ipv4_mapped_gid(addr0).value);
}
