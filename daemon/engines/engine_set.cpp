#include "daemon/engines/engine_set.h"

#include <spdlog/spdlog.h>

#include <stdexcept>

namespace ferry::daemon {

namespace {

// Each engine is its own peer identity (channels pair engines): distinct,
// nonzero epochs derived from the daemon's.
std::uint64_t engine_epoch(std::uint64_t daemon_epoch, std::uint32_t e) noexcept {
  const std::uint64_t v = daemon_epoch ^ (std::uint64_t{e} * 0x9E3779B97F4A7C15ull);
  return v == 0 ? 1 : v;
}

}  // namespace

EngineSet::EngineSet(const Config& config, const EnginePlan& plan, std::uint64_t token_key, std::uint64_t epoch)
    : group_(std::make_unique<EngineGroup>(plan.engines)), cpus_(plan.cpus), clients_(plan.engines, 0) {
  std::vector<ServiceOwner> owners;
  if (const Error bad = parse_service_owners(config.service_owners, owners); bad.failed())
    throw std::runtime_error(bad.message());  // start-up only
  group_->directory.reserve(std::move(owners));
  for (std::uint32_t e = 0; e < plan.engines; ++e) {
    counters_.push_back(std::make_unique<Counters>());
    engines_.push_back(
        std::make_unique<Engine>(config, *counters_.back(), token_key, engine_epoch(epoch, e), *group_, e));
  }
  std::vector<int> wake;
  for (const auto& eng : engines_) wake.push_back(eng->wake_fd());
  group_->rings = std::make_unique<CrossRings>(std::move(wake));
  for (const auto& eng : engines_) group_->members.push_back(eng.get());
  group_->compact = plan.compact;
  group_->max_threads = plan.threads;
  for (const auto& eng : engines_) eng->join_group();
}

EngineSet::~EngineSet() { stop(); }

void EngineSet::start() {
  for (std::uint32_t e = 0; e < size(); ++e) {
    threads_.emplace_back([this, e] {
      if (const Error bad = pin_this_thread(cpus_[e]); bad.failed())
        spdlog::warn("engine {}: {}; running unpinned", e, bad.message());
      engines_[e]->run();
    });
  }
  for (std::uint32_t e = 0; e < size(); ++e) {
    spdlog::info("engine {} started{}", e, cpus_[e] < 0 ? std::string() : " on CPU " + std::to_string(cpus_[e]));
  }
}

void EngineSet::stop() {
  for (std::size_t e = 0; e < threads_.size(); ++e) {
    while (!engines_[e]->submit(EngineCommand{EngineCommand::Kind::Stop, nullptr, 0})) std::this_thread::yield();
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

std::optional<std::uint32_t> EngineSet::place(std::uint32_t asked) const noexcept {
  if (asked != kAnyEngine) {
    if (asked > size()) return std::nullopt;
    return asked - 1;
  }
  std::uint32_t best = 0;
  for (std::uint32_t e = 1; e < size(); ++e) {
    if (clients_[e] < clients_[best]) best = e;
  }
  return best;
}

void EngineSet::total(Counters& out) const noexcept {
  // Maxima and gauges that must not add up across engines.
  auto is_max = [](std::string_view name) {
    return name == "engine_turn_max_us" || name == "receive_pool_borrowed_max";
  };
  for (const auto& c : counters_) {
    for_each_counter_pair(out, *c, [&](std::string_view name, Counter& into, const Counter& from) {
      const std::uint64_t v = read(from);
      if (is_max(name)) {
        if (v > read(into)) into.store(v, std::memory_order_relaxed);
      } else {
        bump(into, v);
      }
    });
    for (std::size_t r = 0; r < out.rails.size(); ++r) {
      const RailCounters& f = c->rails[r];
      RailCounters& t = out.rails[r];
      if (&c == &counters_.front()) t.up.store(read(f.up), std::memory_order_relaxed);
      bump(t.lanes, read(f.lanes));
      bump(t.tx_bytes, read(f.tx_bytes));
      bump(t.failures, read(f.failures));
      bump(t.returns, read(f.returns));
    }
  }
  for (const auto& c : counters_) bump(out.engine_busy_ns, read(c->engine_busy_ns));
}

std::vector<peer::PeerInfo> EngineSet::peers_snapshot() const {
  std::vector<peer::PeerInfo> all;
  for (const auto& eng : engines_) {
    std::vector<peer::PeerInfo> one = eng->peers_snapshot();
    for (peer::PeerInfo& p : one) p.engine = eng->index();
    all.insert(all.end(), std::make_move_iterator(one.begin()), std::make_move_iterator(one.end()));
  }
  return all;
}

}  // namespace ferry::daemon
