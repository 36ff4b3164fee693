// What the rdma tests that run inside the Soft-RoCE VM read from their
// surroundings: the environment vm-suite-guest.sh sets (ADDR0/1, RXE0/1,
// FERRYCTL) and the rxe devices' own counters.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ferry::rdmatest {

inline std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// stdout of a shell command ("" when it cannot run).
inline std::string run(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

// rcvd_rnr_err + send_rnr_err of `dev` port 1 (printed for the log); -1 when unreadable.
inline long long rnr_errors(const std::string& dev) {
  const std::string line = run("rdma statistic show link " + dev + "/1 2>&1");
  long long total = 0;
  int found = 0;
  for (const char* key : {"rcvd_rnr_err ", "send_rnr_err "}) {
    const auto at = line.find(key);
    if (at == std::string::npos) continue;
    total += std::atoll(line.c_str() + at + std::string(key).size());
    ++found;
  }
  std::printf("%s: %s\n", dev.c_str(), line.c_str());
  return found == 0 ? -1 : total;
}

}  // namespace ferry::rdmatest
