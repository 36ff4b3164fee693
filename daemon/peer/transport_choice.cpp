#include "daemon/peer/transport_choice.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "daemon/engines/target.h"
#include "daemon/rails/rail_config.h"
#include "ferry_config.h"
#include "transport/tcp/tcp_transport.h"
#if FERRY_HAVE_RDMA
#include "daemon/rails/rail_set.h"
#include "transport/rdma/rdma_transport.h"
#endif

namespace ferry::daemon {

namespace {

// RDMA devices as the kernel lists them; no libibverbs needed to look.
std::string first_rdma_device(const std::string& wanted) {
  // A list ("rxe0,rxe1", "rxe0@ADDR"): its first device; "all": any.
  std::string first = wanted.substr(0, wanted.find_first_of(",@"));
  if (first == "all") first.clear();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/infiniband", ec)) {
    std::string name = entry.path().filename().string();
    if (first.empty() || name == first) return name;
  }
  return {};
}

#if FERRY_HAVE_RDMA
transport::rdma::RdmaConfig rdma_config(const Config& config) {
  transport::rdma::RdmaConfig rc;
  rc.device = config.device;
  if (!config.listen.empty()) {
    if (auto hp = parse_host_port(config.listen)) rc.address = hp->host;
  }
  rc.gid_index = config.gid_index;
  rc.max_eager_bytes = std::max<std::uint32_t>(config.eager_threshold, wire::kMinMessageBytes);
  rc.connect_timeout_ms = config.connect_timeout_ms;
  rc.ack_timeout = static_cast<std::uint8_t>(config.rdma_ack_timeout);
  rc.recv_pool = config.receive_pool;  // the one shared receive queue (receive-pool)
  rc.max_connections = config.rdma_max_connections;
  // The connection manager admits requests by the bootstrap listener's rules (transport/accept_guard.h).
  rc.hello_timeout_ms = config.peer_hello_timeout_ms;
  rc.max_unvouched_per_source = config.peer_max_unauthenticated_per_source;
  return rc;
}

// Several rails: a RdmaTransport per rail behind one RailSet. Any rail that
// cannot be made fails start-up (a rail silently missing would halve the
// bandwidth with nobody told).
DataTransport make_rails(const Config& config, const std::vector<rails::RailSpec>& specs, DataTransport out) {
  std::vector<std::unique_ptr<transport::rdma::RdmaTransport>> made;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    transport::rdma::RdmaConfig rc = rdma_config(config);
    rc.device = specs[i].device;
    rc.address = specs[i].address;
    auto t = transport::rdma::RdmaTransport::create(rc);
    if (!t) {
      out.error = "rail " + std::to_string(i) + " (device " + specs[i].device + ", address " + specs[i].address +
                  "): RdmaTransport failed (" + std::string(to_string(t.status)) + ")";
      if (config.transport != Transport::Rdma) {
        out.choice = {"tcp", "transport auto -> tcp: " + out.error};
        out.error.clear();
      }
      return out;
    }
    spdlog::info("rail {}: device {} address {} gid index {} ({}: {})", i, t.value->device_name(), rc.address,
                 t.value->gid().index, t.value->gid().gid, t.value->gid().reason);
    made.push_back(std::move(t.value));
  }
  out.choice.reason += "; data lanes on " + std::to_string(made.size()) + " rails (eager threshold " +
                       std::to_string(config.eager_threshold) + " B)";
  out.pd = made[0]->pd();
  out.gid_index = made[0]->gid().index;
  out.software_rdma = made[0]->software_provider();
  out.rdma_stats = &made[0]->stats();
  auto set = std::make_unique<rails::RailSet>(std::move(made));
  out.rails = set.get();
  out.transport = std::move(set);
  return out;
}
#endif

}  // namespace

TransportChoice choose_transport(const Config& config) {
  switch (config.transport) {
    case Transport::Tcp: return {"tcp", "transport tcp (requested)"};
    case Transport::Rdma: return {"rdma", "transport rdma (requested)"};
    case Transport::Auto: break;
  }
  if (!FERRY_HAVE_RDMA) return {"tcp", "transport auto -> tcp: built without rdma support"};
  std::string dev = first_rdma_device(config.device);
  if (dev.empty()) {
    return {"tcp", config.device.empty() ? "transport auto -> tcp: no RDMA device in /sys/class/infiniband"
                                         : "transport auto -> tcp: RDMA device " + config.device + " not found"};
  }
  return {"rdma", "transport auto -> rdma: RDMA device " + dev + " found"};
}

DataTransport make_data_transport(const Config& config) {
  DataTransport out;
  out.choice = choose_transport(config);
  if (out.choice.name == "tcp") return out;
#if FERRY_HAVE_RDMA
  std::string listen_host;
  if (auto hp = parse_host_port(config.listen)) listen_host = hp->host;
  std::vector<rails::RailSpec> specs;
  if (const Error bad = rails::resolve_rails(config.device, listen_host, "/sys", specs); bad.failed()) {
    if (config.transport == Transport::Rdma) {
      out.error = "transport rdma requested but " + bad.message();
    } else {
      out.choice = {"tcp", "transport auto -> tcp: " + bad.message()};
    }
    return out;
  }
  if (specs.size() > 1) return make_rails(config, specs, std::move(out));
  transport::rdma::RdmaConfig one = rdma_config(config);
  one.device = specs[0].device;
  if (!specs[0].address.empty()) one.address = specs[0].address;
  auto t = transport::rdma::RdmaTransport::create(one);
  if (t) {
    const std::string dev = t.value->device_name();
    out.choice.reason += "; data lanes on " + dev + " (gid index " + std::to_string(t.value->gid().index) +
                         ", eager threshold " + std::to_string(config.eager_threshold) + " B)";
    out.pd = t.value->pd();
    out.gid_index = t.value->gid().index;
    out.software_rdma = t.value->software_provider();
    out.rdma_stats = &t.value->stats();
    out.transport = std::move(t.value);
    return out;
  }
  const std::string why = "RdmaTransport for device '" + (config.device.empty() ? "any" : config.device) +
                          "' address '" + config.listen + "' failed (" + std::string(to_string(t.status)) + ")";
#else
  const std::string why = "built without rdma support";
#endif
  if (config.transport == Transport::Rdma) {
    out.error = "transport rdma requested but " + why;
    return out;
  }
  out.choice = {"tcp", "transport auto -> tcp: " + why};
  return out;
}

bool Transports::remote_access() const noexcept {
  if (!lanes) return false;
  const transport::TransportCaps c = lanes->caps();
  return c.rdma_read && c.rdma_write_imm;
}

void Transports::release_owner() noexcept {
  bootstrap->release_owner();
  if (lanes) lanes->release_owner();
}

void make_transports(const Config& config, Transports& out) {
  transport::tcp::TcpConfig tc;
  tc.connect_timeout_ms = config.connect_timeout_ms;
  tc.max_connections = config.peer_max_connections;
  tc.hello_timeout_ms = config.peer_hello_timeout_ms;
  tc.max_unvouched_per_source = config.peer_max_unauthenticated_per_source;
  tc.max_message_bytes = std::max<std::uint32_t>(config.max_message_bytes, wire::kMinMessageBytes);
  auto t = transport::tcp::TcpTransport::create(tc);
  if (!t) throw std::runtime_error("tcp transport: cannot create (" + std::string(to_string(t.status)) + ")");
  out.bootstrap = std::move(t.value);
  DataTransport data = make_data_transport(config);
  if (!data.error.empty()) throw std::runtime_error(data.error);  // --transport rdma cannot be had
  spdlog::info("{}", data.choice.reason);
  out.name = data.choice.name;
  out.lanes = std::move(data.transport);
  out.lane_max_message = lane_max_message(config, out.lanes.get());
  out.pd = data.pd;
  out.software_rdma = data.software_rdma;
  out.rdma_stats = data.rdma_stats;
  out.rails = data.rails;
  out.pds[0] = out.pd;
#if FERRY_HAVE_RDMA
  if (out.rails != nullptr) {
    for (std::uint32_t i = 0; i < out.rails->count(); ++i) {
      out.pds[i] = out.rails->pd(i);
      const rails::RailInfo& r = out.rails->info(i);
      out.rail_facts.push_back({r.name, r.address, r.gid_index});
    }
    // Memory windows belong to one PD; a peer's READ/WRITE uses the key of
    // the rail its lane is on, so with several rails the keys are the tx
    // arena's, one per rail (docs/rails.md).
    spdlog::info("{} rails: remote keys are per rail and arena-wide (per-call memory windows are single-rail)",
                 out.rails->count());
    return;
  }
  if (out.pd != nullptr) {
    const auto* one = static_cast<const transport::rdma::RdmaTransport*>(out.lanes.get());
    out.rail_facts.push_back({one->device_name(), one->config().address, one->gid().index});
  }
#endif
  if (out.pd != nullptr) (void)out.keys.enable(out.pd, data.gid_index, config.rdma_windows);  // logs either way
}

void publish_rdma_stats(const Transports& t, Counters& counters) noexcept {
#if FERRY_HAVE_RDMA
  if (t.rails != nullptr) {
    for (std::uint32_t i = 0; i < t.rails->count() && i < counters.rails.size(); ++i) {
      const rails::RailInfo& r = t.rails->info(i);
      RailCounters& c = counters.rails[i];
      c.up.store(r.up ? 1 : 0, std::memory_order_relaxed);
      c.lanes.store(r.lanes, std::memory_order_relaxed);
      c.tx_bytes.store(r.tx_bytes, std::memory_order_relaxed);
      c.failures.store(r.failures, std::memory_order_relaxed);
      c.returns.store(r.returns, std::memory_order_relaxed);
    }
  }
  if (t.rdma_stats == nullptr) return;
  const transport::rdma::RdmaStats& s = *t.rdma_stats;
  const auto set = [](Counter& c, std::uint64_t v) { c.store(v, std::memory_order_relaxed); };
  set(counters.rdma_post_calls, s.post_send_calls);
  set(counters.rdma_wrs_posted, s.wrs_posted);
  set(counters.rdma_wrs_signaled, s.wrs_signaled);
  set(counters.rdma_wrs_inline, s.wrs_inline);
  set(counters.rdma_recvs, s.recvs);
  set(counters.rdma_cq_polls, s.cq_polls);
  set(counters.rdma_cq_polls_empty, s.cq_polls_empty);
  set(counters.rdma_recv_registered_bytes, s.recv_registered_bytes);
  set(counters.rdma_send_registered_bytes, s.send_registered_bytes);
#else
  (void)t;
  (void)counters;
#endif
}

std::uint32_t lane_max_message(const Config& config, const transport::Transport* data) noexcept {
  if (data != nullptr && data->kind() == transport::TransportKind::Rdma) {
    return std::min(config.eager_threshold, config.max_message_bytes);
  }
  return config.max_message_bytes;
}

}  // namespace ferry::daemon
