#include "daemon/front/status_json.h"

#include <sys/resource.h>
#include <unistd.h>

#include "ferry_config.h"

namespace ferry::daemon {

namespace {

std::uint64_t to_us(const timeval& tv) {
  return static_cast<std::uint64_t>(tv.tv_sec) * 1'000'000 + static_cast<std::uint64_t>(tv.tv_usec);
}

std::uint64_t seconds_since(std::chrono::steady_clock::time_point t) {
  auto d = std::chrono::steady_clock::now() - t;
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
}

// One object per rail of the rdma lanes (empty on tcp). Additive: a
// single-rail daemon lists its one device.
json::Value rails_json(const DaemonFacts& f) {
  json::Array a;
  if (f.rails == nullptr) return json::Value(std::move(a));
  for (std::size_t i = 0; i < f.rails->size() && i < f.counters->rails.size(); ++i) {
    const RailFacts& r = (*f.rails)[i];
    const RailCounters& c = f.counters->rails[i];
    json::Object o;
    o["rail"] = json::Value(static_cast<std::uint64_t>(i));
    o["name"] = r.name;
    o["address"] = r.address;
    o["gid_index"] = json::Value(static_cast<std::int64_t>(r.gid_index));
    o["state"] = std::string(read(c.up) != 0 ? "up" : "down");
    o["lanes"] = json::Value(read(c.lanes));
    o["tx_bytes"] = json::Value(read(c.tx_bytes));
    o["failures"] = json::Value(read(c.failures));
    o["returns"] = json::Value(read(c.returns));
    a.emplace_back(std::move(o));
  }
  return json::Value(std::move(a));
}

}  // namespace

json::Value counters_json(const Counters& c) {
  json::Object o;
  for_each_counter(c, [&](const char* name, const Counter& v) { o[name] = json::Value(read(v)); });
  return json::Value(std::move(o));
}

json::Value status_json(const DaemonFacts& f, std::size_t client_count) {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  json::Object o;
  o["version"] = FERRY_VERSION;
  o["uptime_s"] = json::Value(seconds_since(f.started));
  o["transport"] = f.transport;
  o["clients"] = json::Value(static_cast<std::uint64_t>(client_count));
  o["peers"] = f.peers ? f.peers() : json::Value(json::Array{});
  o["counters"] = counters_json(*f.counters);
  o["pid"] = json::Value(static_cast<std::int64_t>(::getpid()));
  o["epoch"] = json::Value(f.epoch);
  o["runtime_dir"] = f.config->runtime_dir;
  o["listen"] = f.config->listen;
  o["cpu_user_us"] = json::Value(to_us(ru.ru_utime));
  o["cpu_sys_us"] = json::Value(to_us(ru.ru_stime));
  o["draining"] = f.draining;
  o["rails"] = rails_json(f);
  return json::Value(std::move(o));
}

json::Value clients_json(const std::vector<std::shared_ptr<const ClientInfo>>& clients) {
  json::Array a;
  for (const auto& c : clients) {
    json::Object o;
    o["id"] = json::Value(c->id);
    o["pid"] = json::Value(static_cast<std::int64_t>(c->pid));
    o["uid"] = json::Value(static_cast<std::uint64_t>(c->uid));
    o["gid"] = json::Value(static_cast<std::uint64_t>(c->gid));
    o["name"] = c->name;
    o["engine"] = json::Value(static_cast<std::uint64_t>(c->engine));
    o["tx_bytes"] = json::Value(c->tx_bytes);
    o["rx_bytes"] = json::Value(c->rx_bytes);
    o["memory"] = json::Value(c->tx_bytes + c->rx_bytes);
    o["endpoints"] = json::Value(c->endpoints.load(std::memory_order_relaxed));
    o["services"] = json::Value(c->services.load(std::memory_order_relaxed));
    o["attached_s"] = json::Value(seconds_since(c->attached_at));
    a.emplace_back(std::move(o));
  }
  return json::Value(std::move(a));
}

}  // namespace ferry::daemon
