#include "daemon/engines/engine_cpus.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace ferry::daemon {

namespace {

std::optional<int> cpu_number(std::string_view s) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v < 0 || v >= CPU_SETSIZE) return std::nullopt;
  return v;
}

}  // namespace

Error parse_cpu_list(std::string_view text, std::vector<int>& out) {
  out.clear();
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const std::string bad = "invalid CPU list item '" + std::string(item) + "' (expected N or N-M)";
    const std::size_t dash = item.find('-');
    const auto lo = cpu_number(item.substr(0, dash));
    const auto hi = dash == std::string_view::npos ? lo : cpu_number(item.substr(dash + 1));
    if (!lo || !hi || *hi < *lo) return Error::bad_request(bad);
    for (int c = *lo; c <= *hi; ++c) out.push_back(c);
  }
  return {};
}

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::uint32_t engines_for_cpus(std::size_t cpus) noexcept {
  const std::size_t n = cpus / 4;
  return static_cast<std::uint32_t>(std::clamp<std::size_t>(n, 1, kMaxEngines));
}

Error plan_engines(std::uint32_t configured, std::uint32_t threads, std::string_view cpu_list, EnginePlan& out) {
  const std::vector<int> allowed = allowed_cpus();
  if (configured == 0) {
    // FERRYD_ENGINES stands in for auto (test runs use it to put every
    // ferryd they start on several engines).
    if (const char* env = std::getenv("FERRYD_ENGINES"); env != nullptr && *env != '\0') {
      std::uint32_t v = 0;
      const auto [end, ec] = std::from_chars(env, env + std::strlen(env), v);
      if (ec != std::errc{} || *end != '\0' || v < 1 || v > kMaxEngines) {
        return Error::bad_request("FERRYD_ENGINES: '" + std::string(env) + "' is not in [1, " +
                                  std::to_string(kMaxEngines) + "]");
      }
      configured = v;
    }
  }
  const std::uint32_t for_cpus = engines_for_cpus(allowed.empty() ? 1 : allowed.size());
  out.engines = configured != 0 ? configured : for_cpus;
  out.threads = std::min(out.engines, threads != 0 ? threads : for_cpus);
  std::vector<int> listed;
  if (const Error bad = parse_cpu_list(cpu_list, listed); bad.failed())
    return Error::bad_request("engine-cpus: " + bad.message());
  for (int c : listed) {
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), c) == allowed.end()) {
      return Error::bad_request("engine-cpus: CPU " + std::to_string(c) +
                                " is not one ferryd may run on (its affinity mask)");
    }
  }
  out.cpus.assign(out.engines, -1);
  for (std::uint32_t e = 0; e < out.engines && !listed.empty(); ++e) out.cpus[e] = listed[e % listed.size()];
  return {};
}

bool compact_by_default() noexcept {
  const char* env = std::getenv("FERRYD_ENGINE_COMPACT");
  return env == nullptr || std::strcmp(env, "off") != 0;
}

Error pin_this_thread(int cpu) {
  if (cpu < 0) return {};
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const int rc = ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
  if (rc != 0)
    return Error(Status::NotSupported, "cannot pin to CPU " + std::to_string(cpu) + ": " + std::strerror(rc));
  return {};
}

}  // namespace ferry::daemon
