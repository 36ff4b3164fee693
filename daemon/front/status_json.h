// What the control socket reports: status, clients and counters as JSON
// values (shapes in control/control_protocol.h; tools outside the project rely on them).
// Control thread only; reads engine-written counters with relaxed loads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/json.h"
#include "daemon/config/config.h"
#include "daemon/counters.h"
#include "daemon/rails/rail_facts.h"
#include "daemon/session/client_session.h"

namespace ferry::daemon {

struct DaemonFacts {
  const Config* config = nullptr;
  const Counters* counters = nullptr;
  std::string transport;  // resolved: "rdma" or "tcp"
  std::uint64_t epoch = 0;
  std::chrono::steady_clock::time_point started;
  bool draining = false;
  std::function<json::Value()> peers;             // the channel table (engine snapshot); empty array when unset
  const std::vector<RailFacts>* rails = nullptr;  // the rdma lanes' rails (status "rails"); null: none
};

json::Value counters_json(const Counters& c);
json::Value status_json(const DaemonFacts& facts, std::size_t client_count);
json::Value clients_json(const std::vector<std::shared_ptr<const ClientInfo>>& clients);

}  // namespace ferry::daemon
