#include "daemon/transport_choice.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "daemon/target.h"
#include "ferry_config.h"
#include "transport/tcp/tcp_transport.h"
#if FERRY_HAVE_RDMA
#include "transport/rdma/rdma_transport.h"
#endif

namespace ferry::daemon {

namespace {

// RDMA devices as the kernel lists them; no libibverbs needed to look.
std::string first_rdma_device(const std::string& wanted) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/infiniband", ec)) {
    std::string name = entry.path().filename().string();
    if (wanted.empty() || name == wanted) return name;
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
  return rc;
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
  auto t = transport::rdma::RdmaTransport::create(rdma_config(config));
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
  if (out.pd != nullptr) (void)out.keys.enable(out.pd, data.gid_index, config.rdma_windows);  // logs either way
}

void publish_rdma_stats(const Transports& t, Counters& counters) noexcept {
#if FERRY_HAVE_RDMA
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
