#include "daemon/daemon.h"

#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <functional>
#include <memory>
#include <random>
#include <thread>

#include "daemon/config/config_reload.h"
#include "daemon/config/config_rules.h"
#include "daemon/engines/engine_set.h"
#include "daemon/engines/engine_status.h"
#include "daemon/front/attach_server.h"
#include "daemon/front/control_server.h"
#include "daemon/front/descriptor_limit.h"
#include "daemon/front/runtime_dir.h"
#include "daemon/front/socket_group.h"
#include "daemon/front/status_json.h"
#include "daemon/loop/engine_fault.h"
#include "daemon/peer/peer_status_json.h"
#include "daemon/peer/transport_choice.h"
#include "daemon/systemd/notify.h"
#include "daemon/systemd/status_reporter.h"
#include "ferry_config.h"

namespace ferry::daemon {

namespace {

std::uint64_t random_u64() {
  std::uint64_t v = 0;
  if (::getrandom(&v, sizeof(v), 0) != sizeof(v))
    v = std::random_device{}() ^ (std::uint64_t{std::random_device{}()} << 32);
  return v == 0 ? 1 : v;
}

}  // namespace

int run_daemon(const Config& config) {
  std::signal(SIGPIPE, SIG_IGN);
  const Notifier notifier;  // $NOTIFY_SOCKET (systemd Type=notify); no-op without it
  if (notifier.error().failed()) spdlog::warn("{}", notifier.error().message());
  const TransportChoice transport = choose_transport(config);
  const std::uint64_t epoch = random_u64();
  spdlog::info("ferryd {} starting: pid {} epoch {:#018x} runtime dir {}", FERRY_VERSION, ::getpid(), epoch,
               config.runtime_dir);
  spdlog::info("{} (checked against the device at engine start)", transport.reason);
  log_fault_injection_state();
  for (const std::string& caution : config_cautions(config)) spdlog::warn("{}", caution);

  EnginePlan plan;
  if (const Error bad = plan_engines(config.engines, config.engine_threads, config.engine_cpus, plan); bad.failed()) {
    spdlog::error("{}", bad.message());
    return 1;
  }
  spdlog::info("{} engine{} ({}){}", plan.engines, plan.engines == 1 ? "" : "s",
               config.engines == 0 ? "engines auto: one per four CPUs ferryd may use" : "engines",
               config.engine_cpus.empty() ? std::string() : ", pinned to CPUs " + config.engine_cpus);
  plan.compact = config.engine_compact == EngineCompact::Default ? compact_by_default()
                                                                 : config.engine_compact == EngineCompact::On;
  if (plan.engines > 1) {
    spdlog::info("engine-compact {}: {}", plan.compact ? "on" : "off",
                 plan.compact
                     ? "engine 0's thread runs the others while traffic is light, at most " +
                           std::to_string(plan.threads) + " on threads of their own (engine-threads " +
                           (config.engine_threads == 0 ? std::string("auto") : std::to_string(config.engine_threads)) +
                           ")"
                     : std::string("every engine on its own thread"));
  }

  DescriptorLimit fds;
  if (const Error bad = ensure_descriptor_limit(config, plan.engines, &fds); bad.failed()) {
    spdlog::error("{}", bad.message());
    return 1;
  }
  if (fds.soft != fds.soft_before) {
    spdlog::info(
        "raised the soft descriptor limit from {} to {} (max-clients {} and peer-max-connections {} need about that "
        "many; hard limit {})",
        fds.soft_before, fds.soft, config.max_clients, config.peer_max_connections, fds.hard);
  }

  if (Error e = ensure_runtime_dir(config.runtime_dir); e.failed()) {
    spdlog::error("{}", e.message());
    return 1;
  }
  const std::string client_path = config.runtime_dir + "/ferryd.sock";
  const std::string control_path = config.runtime_dir + "/control.sock";
  SocketFile client_file, control_file;
  int client_fd = -1, control_fd = -1;
  if (Error e = listen_unix(client_path, SOCK_SEQPACKET, &client_fd, &client_file); e.failed()) {
    spdlog::error("{}", e.message());
    return 1;
  }
  if (Error e = listen_unix(control_path, SOCK_STREAM, &control_fd, &control_file); e.failed()) {
    spdlog::error("{}", e.message());
    ::close(client_fd);
    unlink_ours(client_file);
    return 1;
  }

  for (const auto& path : {client_path, control_path}) {
    if (Error e = apply_socket_group(path, config.socket_group); e.failed()) {
      spdlog::error("{}", e.message());
      ::close(client_fd);
      ::close(control_fd);
      unlink_ours(client_file);
      unlink_ours(control_file);
      return 1;
    }
  }

  // What SIGHUP may change (config_reload.h) lives in `live`, read only on
  // this (asio) thread; the engine keeps the start-up `config`, so a reload
  // never races with the engine thread.
  Config live = config;
  EngineSet engines(config, plan, random_u64(), epoch);
  try {
    engines.start();  // throws when a peer port or a device cannot be had
  } catch (...) {
    ::close(client_fd);
    ::close(control_fd);
    unlink_ours(client_file);  // no stale sockets that look like a live ferryd
    unlink_ours(control_file);
    throw;
  }

  asio::io_context io;
  AttachServer attach(io, live, engines, epoch);
  EngineRates rates(engines);
  DaemonFacts facts{&live, nullptr, engines.engine(0).transport_name(), epoch, std::chrono::steady_clock::now(),
                    false, {}};
  std::unique_ptr<Counters> total;  // every engine's counters, summed at each request
  auto totals = [&]() -> const Counters& {
    total = std::make_unique<Counters>();
    engines.total(*total);
    facts.counters = total.get();
    return *total;
  };
  facts.peers = [&engines] { return peer::peers_json(engines.peers_snapshot()); };
  facts.rails = &engines.engine(0).rail_facts();
  auto status = [&] {
    facts.draining = attach.draining();
    // The snapshot first: each engine publishes its transports' counters with it.
    std::vector<peer::PeerInfo> peers = engines.peers_snapshot();
    totals();
    facts.peers = [&peers] { return peer::peers_json(peers); };
    json::Value v = status_json(facts, attach.client_count());
    (*v.as_object())["engines"] = rates.json(peers);
    return v;
  };
  ControlCommands commands;
  commands.status = status;
  commands.clients = [&] { return clients_json(attach.clients()); };
  commands.counters = [&] {
    (void)engines.peers_snapshot();  // the engines publish their transports' counters with it
    return counters_json(totals());
  };
  commands.peers = [&] { return peer::peers_json(engines.peers_snapshot()); };
  commands.channels = [&] { return peer::channels_json(engines.peers_snapshot()); };
  commands.drain = [&] {
    attach.set_draining(true);
    spdlog::info("draining: new attaches are refused (ferryctl resume undoes it)");
    json::Object o;
    o["draining"] = true;
    return json::Value(std::move(o));
  };
  commands.resume = [&] {
    const bool was = attach.draining();
    attach.set_draining(false);
    spdlog::info("{}", was ? "resumed: attaches are accepted again" : "resume: was not draining");
    json::Object o;
    o["draining"] = false;
    return json::Value(std::move(o));
  };
  ControlServer control(io, live, [&](std::string_view line, const ControlCaller& caller) {
    return handle_control_line(line, caller, commands);
  });
  attach.start(client_fd);
  control.start(control_fd);
  StatusReporter reporter(io, notifier, status);
  asio::steady_timer rate_timer(io);
  std::function<void()> sample_rates = [&] {
    rate_timer.expires_after(std::chrono::seconds(1));
    rate_timer.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      rates.sample();
      sample_rates();
    });
  };
  sample_rates();

  asio::signal_set hangup(io, SIGHUP);
  std::function<void()> await_hangup = [&] {
    hangup.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      spdlog::info("SIGHUP: reloading configuration");
      notifier.reloading("reloading configuration");
      ReloadOutcome r = reload_config(live);
      notifier.ready(reporter.line() + "; " + r.summary);
      await_hangup();
    });
  };
  await_hangup();

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: shutting down", sig);
    notifier.stopping("stopping: signal " + std::to_string(sig));
    reporter.stop();
    boost::system::error_code ignored;
    hangup.cancel(ignored);
    rate_timer.cancel();
    // Stop accepting and hang up on every client (they see DaemonGone), then
    // let the engine detach them all and exit.
    attach.stop();
    control.stop();
    engines.stop();
  });
  spdlog::info("ready: clients {} control {}", client_path, control_path);
  notifier.ready(reporter.line());
  reporter.start();
  io.run();

  engines.stop();
  unlink_ours(client_file);
  unlink_ours(control_file);
  spdlog::info("ferryd stopped");
  return 0;
}

}  // namespace ferry::daemon
