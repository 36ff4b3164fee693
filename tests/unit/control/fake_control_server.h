// A stand-in for ferryd's control socket: a thread answering canned JSON
// lines on a Unix socket in a fresh temp directory, recording each request.
// Lets the client and ferryctl tests run real sockets and processes without
// a daemon.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ferry::test {

class FakeControlServer {
 public:
  // Reply for a cmd: a complete response line (without '\n'), or one of the
  // special behaviours below. Commands absent from the map get
  // {"ok":false,"error":"unknown command: <cmd>"}.
  static constexpr const char* kCloseWithoutReply = "<close>";
  static constexpr const char* kNeverReply = "<hang>";

  explicit FakeControlServer(std::map<std::string, std::string> replies);
  ~FakeControlServer();
  FakeControlServer(const FakeControlServer&) = delete;
  FakeControlServer& operator=(const FakeControlServer&) = delete;

  const std::string& socket_path() const { return path_; }
  const std::string& dir() const { return dir_; }
  // The "cmd" of every request received so far, in order.
  std::vector<std::string> commands() const;

 private:
  void serve();
  void handle(int fd);

  std::map<std::string, std::string> replies_;
  std::string dir_;
  std::string path_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  mutable std::mutex mu_;
  std::vector<std::string> commands_;
  std::thread thread_;
};

}  // namespace ferry::test
