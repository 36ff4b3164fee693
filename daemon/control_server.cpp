#include "daemon/control_server.h"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/write.hpp>

#include "control/control_protocol.h"

namespace ferry::daemon {

struct ControlServer::Conn {
  explicit Conn(asio::io_context& io) : sock(io) {}
  asio::local::stream_protocol::socket sock;
  control::LineReader reader;
  std::array<char, 4096> buf{};
  std::string out;
};

ControlServer::ControlServer(asio::io_context& io, Handler handler)
    : io_(io), handler_(std::move(handler)), acceptor_(io) {}

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
  for (auto& w : conns_) {
    if (auto c = w.lock()) c->sock.close(ec);
  }
  conns_.clear();
}

void ControlServer::accept_next() {
  auto conn = std::make_shared<Conn>(io_);
  acceptor_.async_accept(conn->sock, [this, conn](const boost::system::error_code& ec) {
    if (stopped_) return;
    if (!ec) {
      // Forget connections that have ended so the list does not grow.
      std::erase_if(conns_, [](const std::weak_ptr<Conn>& w) { return w.expired(); });
      conns_.push_back(conn);
      read_more(conn);
    } else if (ec == asio::error::operation_aborted) {
      return;
    }
    accept_next();
  });
}

void ControlServer::read_more(const std::shared_ptr<Conn>& conn) {
  conn->sock.async_read_some(asio::buffer(conn->buf), [this, conn](const boost::system::error_code& ec, std::size_t n) {
    if (ec || stopped_) return;  // EOF or error: the shared_ptr goes, the socket closes
    conn->reader.feed(std::string_view(conn->buf.data(), n));
    answer(conn);
  });
}

void ControlServer::answer(const std::shared_ptr<Conn>& conn) {
  std::string line;
  bool close_after = false;
  conn->out.clear();
  for (;;) {
    auto state = conn->reader.next(&line);
    if (state == control::LineReader::State::NeedMore) break;
    if (state == control::LineReader::State::TooLong) {
      conn->out += control::encode_error("request line longer than 64 KiB");
      close_after = true;
      break;
    }
    conn->out += handler_(line);
  }
  if (conn->out.empty()) {
    read_more(conn);
    return;
  }
  asio::async_write(conn->sock, asio::buffer(conn->out),
                    [this, conn, close_after](const boost::system::error_code& ec, std::size_t) {
                      if (ec || stopped_ || close_after) return;
                      read_more(conn);
                    });
}

std::string handle_control_line(std::string_view line, const std::function<json::Value()>& status,
                                const std::function<json::Value()>& clients,
                                const std::function<json::Value()>& counters, const std::function<json::Value()>& drain,
                                const std::function<json::Value()>& peers,
                                const std::function<json::Value()>& channels) {
  std::string error;
  auto req = control::decode_request(line, &error);
  if (!req) return control::encode_error("bad request: " + error);
  auto cmd = req->command();
  if (!cmd) return control::encode_error("unknown command: " + req->cmd);
  switch (*cmd) {
    case control::Command::Status: return control::encode_ok(status());
    case control::Command::Clients: return control::encode_ok(clients());
    case control::Command::Counters: return control::encode_ok(counters());
    case control::Command::Peers: return control::encode_ok(peers ? peers() : json::Value(json::Array{}));
    case control::Command::Channels: return control::encode_ok(channels ? channels() : json::Value(json::Array{}));
    case control::Command::Drain: return control::encode_ok(drain());
  }
  return control::encode_error("unknown command: " + req->cmd);
}

}  // namespace ferry::daemon
