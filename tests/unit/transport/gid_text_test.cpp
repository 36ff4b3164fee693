#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "transport/gid_text.h"

using namespace ferry::transport;
using ferry::Status;

TEST_CASE("gid text: IPv4-mapped GIDs both ways", "[gid]") {
  CHECK(ipv4_mapped_gid("198.18.0.1").value == "0000:0000:0000:0000:0000:ffff:c612:0001");
  CHECK(ipv4_mapped_gid("255.0.10.7").value == "0000:0000:0000:0000:0000:ffff:ff00:0a07");
  CHECK(ipv4_mapped_gid("not an address").status == Status::BadRequest);
  CHECK(ipv4_mapped_gid("fe80::1").status == Status::BadRequest);
  CHECK(mapped_ipv4("0000:0000:0000:0000:0000:ffff:c612:0001").value == "198.18.0.1");
  CHECK(mapped_ipv4("0000:0000:0000:0000:0000:ffff:ff00:0a07").value == "255.0.10.7");
  for (const char* a : {"0.0.0.0", "10.1.2.3", "198.19.255.254"})
    CHECK(mapped_ipv4(ipv4_mapped_gid(a).value).value == a);
  // Not IPv4-mapped, malformed, truncated: nothing.
  CHECK(mapped_ipv4("fe80:0000:0000:0000:0000:0000:0000:0001").status == Status::BadRequest);
  CHECK(mapped_ipv4("0000:0000:0000:0000:0000:ffff:c612-0001").status == Status::BadRequest);
  CHECK(mapped_ipv4("0000:0000:0000:0000:0000:ffff:c6g2:0001").status == Status::BadRequest);
  CHECK(mapped_ipv4("0000:0000:0000:0000:0000:ffff:c612:001").status == Status::BadRequest);
  CHECK(mapped_ipv4("").status == Status::BadRequest);
}

TEST_CASE("gid text: a sysfs line loses its newline; a missing file reads empty", "[gid]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ferry-gid-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "type") << "RoCE v2\n";
  std::ofstream(dir / "empty") << "";
  CHECK(read_sysfs_line((dir / "type").string()) == "RoCE v2");
  CHECK(read_sysfs_line((dir / "empty").string()).empty());
  CHECK(read_sysfs_line((dir / "absent").string()).empty());
  std::filesystem::remove_all(dir);
}
