// The attach side of the control thread: accepts clients on the SOCK_SEQPACKET
// socket, runs the handshake (shm/attach_protocol.h), creates the client's
// segment and doorbells, hands the session to the engine, and watches the
// connection so a client's hang-up (exit, crash, SIGKILL) detaches it at once.
// Also relays the engine's own detaches (corrupt rings) back to connections.
// Control (asio) thread only.
#pragma once

#include <spdlog/fmt/fmt.h>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/counters.h"
#include "daemon/engines/engine_set.h"
#include "daemon/front/accept_backoff.h"
#include "daemon/session/client_session.h"
#include "shm/attach_protocol.h"
#include "transport/log_limiter.h"

namespace ferry::daemon {

namespace asio = boost::asio;

inline constexpr int kHandshakeTimeoutMs = 5000;
// Connections that have not finished their attach request, at most: past
// it the listener stops accepting until one finishes or times out, so a
// flood of silent connects holds a bounded number of descriptors.
inline constexpr std::size_t kMaxHandshakes = 64;

class AttachServer {
 public:
  AttachServer(asio::io_context& io, const Config& config, EngineSet& engines, std::uint64_t epoch);
  ~AttachServer();

  // Takes the listening fd (from listen_unix) and starts accepting.
  void start(int listen_fd);
  // Stops accepting and closes every client connection (clients then see
  // DaemonGone). No detach commands are sent: the engine is stopping.
  void stop();

  std::vector<std::shared_ptr<const ClientInfo>> clients() const;
  std::size_t client_count() const noexcept { return conns_.size(); }
  // Draining: new attaches are refused with Busy; attached clients stay.
  void set_draining(bool on) noexcept { draining_ = on; }
  bool draining() const noexcept { return draining_; }

 private:
  struct Conn {
    explicit Conn(asio::io_context& io, int fd) : sock(io, fd), timer(io) {}
    asio::posix::stream_descriptor sock;
    asio::steady_timer timer;
    std::uint32_t id = 0;
    std::uint32_t engine = 0;  // where it was placed
    std::shared_ptr<ClientInfo> info;
    std::uint64_t segment_bytes = 0;  // counted against the memory quotas while attached
  };
  using ConnPtr = std::shared_ptr<Conn>;

  void accept_next();
  void on_accept_ready();
  // Why an attach was refused. A client that retries in a loop must not
  // turn each refusal into log lines: one line per kind per 10 s, carrying
  // the count of those not logged (transport/log_limiter.h).
  enum class Refusal : std::uint8_t {
    Request,     // no credentials, a malformed or mismatched request
    Busy,        // max-clients, or draining
    Sizes,       // arenas past their maximum, or invalid
    UidClients,  // max-clients-per-uid
    UidMemory,   // max-memory-bytes-per-uid
    Memory,      // max-memory-bytes
    Resources,   // the segment, doorbells or rdma registration could not be had
    Count,
  };
  // Logs one refusal (warn) unless its kind already logged within the interval.
  template <typename... Args>
  void log_refusal(Refusal kind, fmt::format_string<Args...> format, Args&&... args) const;
  // Busy or NoMemory (and a log line) when one more client of `uid` with a
  // segment of `segment_bytes` would pass a quota (config.h, "Quotas").
  Status check_quotas(const ClientInfo& who, std::uint64_t segment_bytes) const;
  void on_handshake(const ConnPtr& conn);
  Status attach(const ConnPtr& conn, const shm::AttachRequest& req, ClientSession** session);
  void watch(const ConnPtr& conn);
  void hang_up(const ConnPtr& conn);
  void close_conn(const ConnPtr& conn);
  void send_engine(std::uint32_t engine, const EngineCommand& cmd);
  void watch_engine_events(std::uint32_t engine);

  asio::io_context& io_;
  const Config& config_;
  EngineSet& engines_;
  std::uint64_t epoch_;
  asio::posix::stream_descriptor listener_;
  std::vector<std::unique_ptr<asio::posix::stream_descriptor>> engine_events_;  // one per engine
  asio::steady_timer retry_timer_;
  asio::steady_timer backoff_timer_;
  AcceptBackoff backoff_{"attach socket"};
  mutable std::array<transport::LogLimiter, static_cast<std::size_t>(Refusal::Count)> refusal_logs_{};
  bool accept_armed_ = false;  // an async_wait on the listener is pending
  bool backing_off_ = false;   // accept failed for want of resources: waiting
  // An engine's queue was full: retried on a timer, in order.
  std::vector<std::pair<std::uint32_t, EngineCommand>> unsent_;
  std::set<ConnPtr> handshaking_;
  std::map<std::uint32_t, ConnPtr> conns_;  // attached
  std::uint32_t next_id_ = 1;
  bool stopped_ = false;
  bool draining_ = false;
};

}  // namespace ferry::daemon
