// The control socket: JSON lines over a Unix stream socket
// (control/control_protocol.h). Answers status, clients, counters, peers,
// channels, and the privileged drain and resume; anything else (unknown
// command, bad JSON, over-long line) gets {"ok":false,...} and never takes
// the daemon down. Control (asio) thread only.
//
// A hostile or broken client costs bounded resources (config.h, "Control
// socket"): at most control-max-connections connections (administrators
// have kAdminReserve more), each closed after control-idle-timeout-ms
// without progress, each holding at most control-output-bytes of unsent
// answers (plus one answer) before ferryd stops reading it.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/json.h"
#include "daemon/config/config.h"
#include "daemon/front/accept_backoff.h"

namespace ferry::daemon {

namespace asio = boost::asio;

// Extra connections for administrators past control-max-connections.
inline constexpr std::uint32_t kAdminReserve = 8;

// Who is on the other end of a control connection (SO_PEERCRED).
struct ControlCaller {
  pid_t pid = 0;
  uid_t uid = 0;
  bool admin = false;  // root, ferryd's own user, or a member of admin-group
};

// Whether uid/gid (and the supplementary groups of the peer on `fd`, when
// fd >= 0) may run privileged commands under `admin_group`.
[[nodiscard]] bool is_admin(uid_t uid, gid_t gid, int fd, const std::string& admin_group);

// What the dispatcher calls; each returns the command's result value.
// Control path: allocation and std::function are fine here.
struct ControlCommands {
  std::function<json::Value()> status;
  std::function<json::Value()> clients;
  std::function<json::Value()> counters;
  std::function<json::Value()> peers;     // empty: []
  std::function<json::Value()> channels;  // empty: []
  std::function<json::Value()> drain;     // privileged
  std::function<json::Value()> resume;    // privileged
};

// The request dispatcher, separate from the socket code so it can be
// tested: one request line in, one answer line ('\n' included) out.
std::string handle_control_line(std::string_view line, const ControlCaller& caller, const ControlCommands& commands);

class ControlServer {
 public:
  using Handler = std::function<std::string(std::string_view line, const ControlCaller& caller)>;

  // `config` is the live configuration (SIGHUP may change the limits).
  ControlServer(asio::io_context& io, const Config& config, Handler handler);
  void start(int listen_fd);
  void stop();

  std::size_t connections() const noexcept { return open_; }

 private:
  struct Conn;
  using ConnPtr = std::shared_ptr<Conn>;
  void accept_next();
  void on_accept(const ConnPtr& conn);
  void refuse(const ConnPtr& conn, std::string_view why);
  void pump(const ConnPtr& conn);
  void start_read(const ConnPtr& conn);
  void start_write(const ConnPtr& conn);
  void arm_deadline(const ConnPtr& conn);
  void close(const ConnPtr& conn);

  asio::io_context& io_;
  const Config& config_;
  Handler handler_;
  asio::local::stream_protocol::acceptor acceptor_;
  asio::steady_timer backoff_timer_;
  AcceptBackoff backoff_{"control socket"};
  std::vector<std::weak_ptr<Conn>> conns_;
  std::size_t open_ = 0;
  static constexpr std::chrono::seconds kRefusalLogEvery{10};
  std::chrono::steady_clock::time_point refusal_logged_{};
  std::uint64_t refused_ = 0;  // refusals not yet logged
  bool stopped_ = false;
};

}  // namespace ferry::daemon
