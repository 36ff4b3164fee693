// Several ferryd "hosts" on one machine for the multihost suite: each
// daemon has its own runtime dir and `--listen ADDR:PORT`; in Loopback
// mode all listen on 127.0.0.1 with free ports, in Netns mode each runs in
// its own network namespace of a NetnsLab (198.18.2.x) and client
// processes are moved into the namespace of their daemon. Daemons are
// killed and reaped, dirs removed and namespaces deleted on every exit
// path. Binaries come from FERRYD / FERRYCTL (set by meson).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/error.h"
#include "tests/multihost/netns_lab.h"

namespace ferry::mhtest {

enum class NetMode : std::uint8_t { Loopback, Netns };
std::string_view to_string(NetMode m) noexcept;

// FERRY_MH_NET=netns selects Netns, anything else Loopback. In Netns mode
// on a machine that cannot build a lab, prints why and exits 77 (skip).
NetMode net_mode_from_env();

// The tunables the channel contract names; the tests pass all of them.
struct DaemonFlags {
  std::uint32_t heartbeat_ms = 100;
  std::uint32_t peer_timeout_ms = 1500;
  std::uint32_t connect_timeout_ms = 1000;
  std::uint32_t channel_conns = 2;
  std::string transport = "tcp";
  // Non-empty: daemon i listens on hosts[i] (addresses the caller set up,
  // e.g. the rxe devices' veths in the Soft-RoCE VM) with a free port,
  // whatever the NetMode says; Loopback mode otherwise.
  std::vector<std::string> hosts;
  std::vector<std::string> extra_args;  // appended to every ferryd command line
  // Node i's ferryd also gets node_args[i] after extra_args (empty: nothing;
  // e.g. its own --device list in the multi-rail checks).
  std::vector<std::vector<std::string>> node_args;
  // Node i's ferryd also gets node_env[i] ("NAME=VALUE"; empty: nothing) in
  // its environment, e.g. a test-only fault switch (tests/fault).
  std::vector<std::string> node_env;
};

struct Node {
  std::string dir;
  std::string host;  // listen address without the port
  std::uint16_t port = 0;
  std::string ns;  // Netns mode: the namespace; empty in Loopback
  pid_t pid = -1;

  std::string socket() const { return dir + "/ferryd.sock"; }
  std::string control() const { return dir + "/control.sock"; }
  std::string listen() const { return host + ":" + std::to_string(port); }
  // "HOST:PORT/SERVICE" for an open() from another daemon's client.
  std::string target(const std::string& service) const { return listen() + "/" + service; }
};

class Cluster {
 public:
  // Starts `count` daemons (throws std::runtime_error with the daemon's log
  // tail when one does not come up listening within its deadline).
  Cluster(std::size_t count, NetMode mode, DaemonFlags flags = {});
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  std::size_t size() const { return nodes_.size(); }
  const Node& node(std::size_t i) const { return nodes_.at(i); }
  NetMode mode() const { return mode_; }
  const DaemonFlags& flags() const { return flags_; }

  bool alive(std::size_t i);
  void kill_hard(std::size_t i);  // SIGKILL + reap
  // Starts node i again (after kill_hard) on the same HOST:PORT, so a new
  // epoch answers there; fresh runtime dir. Throws like the constructor.
  void restart(std::size_t i);
  // Forks a client process in node i's network namespace (its daemon's);
  // the body's return value is the exit code. It dies with this process.
  pid_t spawn_on(std::size_t i, const std::function<int()>& body) const;
  // "HOST:PORT/SERVICE" where no daemon listens: a closed port on
  // 127.0.0.1 (Loopback) or the lab's vacant address (Netns).
  std::string unreachable_target(const std::string& service) const;
  // The last lines of node i's ferryd log (stderr).
  std::string log_tail(std::size_t i, std::size_t bytes = 3000) const;
  // Waits (polling, at most `within`) until the last 64 KiB of node i's log
  // hold `text`: the daemon writes its log asynchronously.
  [[nodiscard]] bool log_has(std::size_t i, std::string_view text, std::chrono::milliseconds within) const;

 private:
  void start(std::size_t i);
  [[nodiscard]] Error try_start(std::size_t i);  // Ok once it listens, else why not

  NetMode mode_;
  DaemonFlags flags_;
  std::unique_ptr<NetnsLab> lab_;
  std::vector<Node> nodes_;
};

// A port on 127.0.0.1 that nothing listens on right now, outside the
// ephemeral range (so outgoing connections do not take it meanwhile).
std::uint16_t pick_free_port();

}  // namespace ferry::mhtest
