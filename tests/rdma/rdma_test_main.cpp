// main() of the real-verbs tests: they need an RDMA device and the two-device
// network of the Soft-RoCE VM (RXE0/RXE1/ADDR0/ADDR1 from the suite runner).
// Without them the program exits 77, which meson and the VM runner count as
// SKIP (Catch2 v2 has no skip of its own).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>

#include "transport/rdma/device.h"

int main(int argc, char** argv) {
  const int devices = ferry::transport::rdma::device_count();
  if (devices == 0 || std::getenv("RXE0") == nullptr || std::getenv("RXE1") == nullptr) {
    std::printf(
        "SKIP: %d RDMA device(s), RXE0/RXE1 %s: these tests run in the Soft-RoCE VM "
        "(tests/rdma/run-vm-suite.sh)\n",
        devices, std::getenv("RXE0") ? "set" : "unset");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
