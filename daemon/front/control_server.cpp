#include "daemon/front/control_server.h"

#include <grp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/write.hpp>

#include "control/control_protocol.h"
#include "daemon/front/attach_socket.h"
#include "transport/log_limiter.h"

namespace ferry::daemon {

struct ControlServer::Conn {
  explicit Conn(asio::io_context& io) : sock(io), deadline(io) {}
  asio::local::stream_protocol::socket sock;
  asio::steady_timer deadline;  // closes the connection when no progress is made in time
  ControlCaller caller;
  control::LineReader reader;
  std::array<char, 4096> buf{};
  std::string out;      // answers not yet handed to a write
  std::string writing;  // the answers of the write in flight
  bool reading = false;
  bool write_busy = false;
  bool close_after = false;  // an over-long line was answered: close once written
  bool eof = false;          // the client sent everything it will send
  bool closed = false;
};

bool is_admin(uid_t uid, gid_t gid, int fd, const std::string& admin_group) {
  if (uid == 0 || uid == ::geteuid()) return true;
  if (admin_group.empty()) return false;
  group gr{};
  group* found = nullptr;
  char buf[16384];
  if (::getgrnam_r(admin_group.c_str(), &gr, buf, sizeof buf, &found) != 0 || found == nullptr) return false;
  if (gid == found->gr_gid) return true;
  if (fd < 0) return false;
  // The peer's supplementary groups as the kernel recorded them at connect.
  std::array<gid_t, 256> groups{};
  socklen_t len = sizeof(groups);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) return false;
  for (std::size_t i = 0; i < len / sizeof(gid_t); ++i) {
    if (groups[i] == found->gr_gid) return true;
  }
  return false;
}

ControlServer::ControlServer(asio::io_context& io, const Config& config, Handler handler)
    : io_(io), config_(config), handler_(std::move(handler)), acceptor_(io), backoff_timer_(io) {}

void ControlServer::start(int listen_fd) {
  boost::system::error_code ec;
  acceptor_.assign(asio::local::stream_protocol(), listen_fd, ec);
  if (ec) {
    spdlog::error("control socket: {}", ec.message());
    return;
  }
  accept_next();
}

void ControlServer::stop() {
  stopped_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  backoff_timer_.cancel();
  for (auto& w : conns_) {
    if (auto c = w.lock()) close(c);
  }
  conns_.clear();
}

void ControlServer::accept_next() {
  auto conn = std::make_shared<Conn>(io_);
  acceptor_.async_accept(conn->sock, [this, conn](const boost::system::error_code& ec) {
    if (stopped_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      if (AcceptBackoff::is_resource_error(ec.value())) {
        // The connection stays queued and the socket readable: wait, never spin.
        backoff_timer_.expires_after(backoff_.on_failure(ec.value()));
        backoff_timer_.async_wait([this](const boost::system::error_code& e) {
          if (!e && !stopped_) accept_next();
        });
        return;
      }
      spdlog::warn("control accept: {}", ec.message());
    } else {
      backoff_.on_success();
      on_accept(conn);
    }
    accept_next();
  });
}

void ControlServer::on_accept(const ConnPtr& conn) {
  std::erase_if(conns_, [](const std::weak_ptr<Conn>& w) { return w.expired(); });
  const int fd = conn->sock.native_handle();
  PeerCred cred;
  if (peer_cred(fd, &cred).failed()) {
    refuse(conn, "cannot read the connection's credentials");
    return;
  }
  conn->caller = ControlCaller{cred.pid, cred.uid, is_admin(cred.uid, cred.gid, fd, config_.admin_group)};
  const std::size_t limit = config_.control_max_connections + (conn->caller.admin ? kAdminReserve : 0);
  if (open_ >= limit) {
    // A connect flood must not become a log flood: one line per 10 s.
    ++refused_;
    const auto now = std::chrono::steady_clock::now();
    if (refusal_logged_ == std::chrono::steady_clock::time_point{} || now - refusal_logged_ >= kRefusalLogEvery) {
      spdlog::warn(
          "control socket: refused a connection of pid {} uid {}: {} open (control-max-connections {}{}); {} "
          "refused since the last such line",
          cred.pid, cred.uid, open_, config_.control_max_connections,
          conn->caller.admin ? ", and the administrators' reserve" : "", refused_);
      refusal_logged_ = now;
      refused_ = 0;
    }
    refuse(conn, "too many control connections (control-max-connections " +
                     std::to_string(config_.control_max_connections) + "); try again later");
    return;
  }
  ++open_;
  conns_.push_back(conn);
  arm_deadline(conn);
  pump(conn);
}

void ControlServer::refuse(const ConnPtr& conn, std::string_view why) {
  // One short line, best effort and never blocking; then the descriptor goes.
  const std::string line = control::encode_error(why);
  [[maybe_unused]] const ssize_t n =
      ::send(conn->sock.native_handle(), line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  boost::system::error_code ec;
  conn->sock.close(ec);
}

void ControlServer::arm_deadline(const ConnPtr& conn) {
  conn->deadline.expires_after(std::chrono::milliseconds(config_.control_idle_timeout_ms));
  conn->deadline.async_wait([this, conn](const boost::system::error_code& ec) {
    if (ec || conn->closed) return;
    spdlog::info(
        "control socket: closing the connection of pid {} uid {}: no progress for {} ms "
        "(control-idle-timeout-ms)",
        conn->caller.pid, conn->caller.uid, config_.control_idle_timeout_ms);
    close(conn);
  });
}

void ControlServer::close(const ConnPtr& conn) {
  if (conn->closed) return;
  conn->closed = true;
  --open_;
  boost::system::error_code ec;
  conn->deadline.cancel();
  conn->sock.close(ec);
}

// Answers buffered request lines while the unsent output stays under
// control-output-bytes, then writes and reads as the state allows: a
// connection whose answers pile up is neither answered further nor read.
void ControlServer::pump(const ConnPtr& conn) {
  if (conn->closed || stopped_) return;
  const std::size_t cap = config_.control_output_bytes;
  bool need_more = false;
  while (!conn->close_after && conn->out.size() + conn->writing.size() < cap) {
    std::string line;
    const auto state = conn->reader.next(&line);
    if (state == control::LineReader::State::NeedMore) {
      need_more = true;
      break;
    }
    if (state == control::LineReader::State::TooLong) {
      conn->out += control::encode_error("request line longer than 64 KiB");
      conn->close_after = true;
      break;
    }
    conn->out += handler_(line, conn->caller);
    arm_deadline(conn);  // a complete request is progress
  }
  if (!conn->write_busy && !conn->out.empty()) start_write(conn);
  // Nothing more will be answered: close once the answers are out.
  const bool done = conn->close_after || (conn->eof && need_more);
  if (done) {
    if (!conn->write_busy) close(conn);
    return;
  }
  if (need_more && !conn->reading) start_read(conn);
}

void ControlServer::start_read(const ConnPtr& conn) {
  conn->reading = true;
  conn->sock.async_read_some(asio::buffer(conn->buf), [this, conn](const boost::system::error_code& ec, std::size_t n) {
    conn->reading = false;
    if (conn->closed || stopped_) return;
    if (ec == asio::error::eof) {  // a half-close: answer what came, then close
      conn->eof = true;
      pump(conn);
      return;
    }
    if (ec) {
      close(conn);
      return;
    }
    conn->reader.feed(std::string_view(conn->buf.data(), n));
    pump(conn);
  });
}

void ControlServer::start_write(const ConnPtr& conn) {
  conn->writing.swap(conn->out);
  conn->out.clear();
  conn->write_busy = true;
  asio::async_write(conn->sock, asio::buffer(conn->writing),
                    [this, conn](const boost::system::error_code& ec, std::size_t) {
                      conn->write_busy = false;
                      conn->writing.clear();
                      if (conn->closed || stopped_) return;
                      if (ec) {
                        close(conn);
                        return;
                      }
                      arm_deadline(conn);  // the client read its answers: progress
                      pump(conn);
                    });
}

std::string handle_control_line(std::string_view line, const ControlCaller& caller, const ControlCommands& c) {
  control::Request request;
  if (Error e = control::decode_request(line, &request); e.failed()) {
    return control::encode_error("bad request: " + e.message());
  }
  const control::Request* req = &request;
  auto cmd = req->command();
  if (!cmd) return control::encode_error("unknown command: " + req->cmd);
  auto privileged = [&](const std::function<json::Value()>& fn) {
    if (!caller.admin) {
      // A client repeating a refused command must not flood the log (control thread only).
      static transport::LogLimiter refusals;
      if (std::uint64_t skipped = 0; refusals.allow(skipped))
        spdlog::warn(
            "control socket: '{}' refused to pid {} uid {}: not root, ferryd's user or admin-group ({} more such "
            "refusals since the last such line)",
            req->cmd, caller.pid, caller.uid, skipped);
      return control::encode_error("permission denied: " + req->cmd +
                                   " needs root, ferryd's own user or a member of admin-group");
    }
    spdlog::info("control socket: '{}' by pid {} uid {}", req->cmd, caller.pid, caller.uid);
    return fn ? control::encode_ok(fn()) : control::encode_error("not supported: " + req->cmd);
  };
  auto optional_array = [](const std::function<json::Value()>& fn) {
    return control::encode_ok(fn ? fn() : json::Value(json::Array{}));
  };
  switch (*cmd) {
    case control::Command::Status: return control::encode_ok(c.status());
    case control::Command::Clients: return control::encode_ok(c.clients());
    case control::Command::Counters: return control::encode_ok(c.counters());
    case control::Command::Peers: return optional_array(c.peers);
    case control::Command::Channels: return optional_array(c.channels);
    case control::Command::Drain: return privileged(c.drain);
    case control::Command::Resume: return privileged(c.resume);
  }
  return control::encode_error("unknown command: " + req->cmd);
}

}  // namespace ferry::daemon
