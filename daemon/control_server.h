// The control socket: JSON lines over a Unix stream socket
// (control/control_protocol.h). Answers status, clients, counters, peers,
// channels and drain; anything else (unknown command, bad JSON, over-long
// line) gets {"ok":false,...} and never takes the daemon down.
// Control (asio) thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <functional>
#include <memory>
#include <string>

#include "control/json.h"

namespace ferry::daemon {

namespace asio = boost::asio;

class ControlServer {
 public:
  // Answers one decoded request: {"ok":...} line, '\n' included.
  using Handler = std::function<std::string(std::string_view line)>;

  ControlServer(asio::io_context& io, Handler handler);
  void start(int listen_fd);
  void stop();

 private:
  struct Conn;
  void accept_next();
  void read_more(const std::shared_ptr<Conn>& conn);
  void answer(const std::shared_ptr<Conn>& conn);

  asio::io_context& io_;
  Handler handler_;
  asio::local::stream_protocol::acceptor acceptor_;
  std::vector<std::weak_ptr<Conn>> conns_;
  bool stopped_ = false;
};

// The request dispatcher, separate from the socket code so it can be tested.
std::string handle_control_line(std::string_view line, const std::function<json::Value()>& status,
                                const std::function<json::Value()>& clients,
                                const std::function<json::Value()>& counters, const std::function<json::Value()>& drain,
                                const std::function<json::Value()>& peers = {},
                                const std::function<json::Value()>& channels = {});

}  // namespace ferry::daemon
