// A daemon's `ferryctl status --json`, parsed, for tests that read counters
// the StatusView of peer_status.h does not carry. FERRYCTL names the tool.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "base/json.h"
#include "tests/multihost/cluster.h"

namespace ferry::mhtest {

inline std::optional<json::Value> status_json(const Node& n) {
  const char* ctl = std::getenv("FERRYCTL");
  if (ctl == nullptr) return std::nullopt;
  FILE* p = ::popen((std::string(ctl) + " --control '" + n.control() + "' status --json 2>/dev/null").c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, got);
  if (::pclose(p) != 0) return std::nullopt;
  return json::parse(out);
}

// A counter of a parsed status; all ones when it is missing.
inline std::uint64_t counter(const json::Value& status, const char* name) {
  const json::Value* c = status.find("counters");
  const json::Value* v = c ? c->find(name) : nullptr;
  const auto u = v ? v->as_uint() : std::nullopt;
  return u ? *u : ~std::uint64_t{0};
}

}  // namespace ferry::mhtest
