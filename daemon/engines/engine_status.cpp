#include "daemon/engines/engine_status.h"

#include <algorithm>

namespace ferry::daemon {

std::uint64_t engine_messages(const Counters& c) noexcept { return read(c.ops_completed) + read(c.remote_delivered); }

EngineRates::EngineRates(const EngineSet& engines)
    : engines_(engines),
      last_at_(std::chrono::steady_clock::now()),
      last_(engines.size()),
      msgs_per_s_(engines.size(), 0.0),
      busy_fraction_(engines.size(), 0.0) {
  for (std::uint32_t e = 0; e < engines.size(); ++e) last_[e] = read_engine(engines, e);
}

EngineRates::Sample EngineRates::read_engine(const EngineSet& set, std::uint32_t e) noexcept {
  const Counters& c = set.counters(e);
  return Sample{engine_messages(c), read(c.engine_busy_ns)};
}

void EngineRates::sample() {
  const auto now = std::chrono::steady_clock::now();
  const double dt = std::chrono::duration<double>(now - last_at_).count();
  if (dt <= 0) return;
  for (std::uint32_t e = 0; e < engines_.size(); ++e) {
    const Sample s = read_engine(engines_, e);
    msgs_per_s_[e] = static_cast<double>(s.msgs - last_[e].msgs) / dt;
    busy_fraction_[e] = std::min(1.0, static_cast<double>(s.busy_ns - last_[e].busy_ns) / (dt * 1e9));
    last_[e] = s;
  }
  last_at_ = now;
}

json::Value EngineRates::json(const std::vector<peer::PeerInfo>& peers) const {
  json::Array a;
  for (std::uint32_t e = 0; e < engines_.size(); ++e) {
    std::uint64_t lanes = 0;
    for (const peer::PeerInfo& p : peers) {
      if (p.engine == e) lanes += p.lane_count;
    }
    const Engine& eng = engines_.engine(e);
    json::Object o;
    o["id"] = json::Value(static_cast<std::uint64_t>(e));
    o["cpu"] = engines_.cpu(e) < 0 ? json::Value() : json::Value(static_cast<std::int64_t>(engines_.cpu(e)));
    o["clients"] = json::Value(static_cast<std::uint64_t>(engines_.clients(e)));
    o["lanes"] = json::Value(lanes);
    o["peer_connections"] = json::Value(read(engines_.counters(e).peer_connections));
    o["msgs_per_s"] = json::Value(static_cast<std::uint64_t>(msgs_per_s_[e] + 0.5));
    o["busy_fraction"] = json::Value(busy_fraction_[e]);
    o["cross_engine_in"] = json::Value(eng.cross_in());
    o["cross_engine_out"] = json::Value(eng.cross_out());
    o["thread"] = json::Value(static_cast<std::uint64_t>(eng.runner()));
    o["port"] = json::Value(static_cast<std::uint64_t>(eng.listen_port()));
    a.emplace_back(std::move(o));
  }
  return json::Value(std::move(a));
}

}  // namespace ferry::daemon
