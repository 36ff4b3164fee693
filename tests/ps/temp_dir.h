// A directory under /tmp for one test case, removed with everything in it
// when the case ends (checkpoint tests).
#pragma once

#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace ferry::ps::test {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/ferry-ps-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

}  // namespace ferry::ps::test
