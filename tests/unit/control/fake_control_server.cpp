#include "fake_control_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "control/control_protocol.h"

namespace ferry::test {

FakeControlServer::FakeControlServer(std::map<std::string, std::string> replies) : replies_(std::move(replies)) {
  char tmpl[] = "/tmp/ferry-ctl-test.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  path_ = dir_ + "/control.sock";
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 16) != 0 || ::pipe2(stop_pipe_, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("fake control server setup: ") + std::strerror(errno));
  }
  thread_ = std::thread([this] { serve(); });
}

FakeControlServer::~FakeControlServer() {
  char b = 1;
  (void)!::write(stop_pipe_[1], &b, 1);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(stop_pipe_[0]);
  ::close(stop_pipe_[1]);
  ::unlink(path_.c_str());
  ::rmdir(dir_.c_str());
}

std::vector<std::string> FakeControlServer::commands() const {
  std::lock_guard<std::mutex> lock(mu_);
  return commands_;
}

void FakeControlServer::serve() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) continue;
    if (p[1].revents != 0) return;
    if ((p[0].revents & POLLIN) == 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    handle(fd);
    ::close(fd);
  }
}

void FakeControlServer::handle(int fd) {
  control::LineReader reader;
  std::string line;
  char buf[4096];
  while (reader.next(&line) != control::LineReader::State::Line) {
    pollfd p[2] = {{fd, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(p, 2, 5000) <= 0 || p[1].revents != 0) return;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    reader.feed(std::string_view(buf, static_cast<std::size_t>(n)));
  }
  control::Request req;
  const std::string cmd = control::decode_request(line, &req).ok() ? req.cmd : std::string("<invalid>");
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back(cmd);
  }
  std::string reply;
  auto it = replies_.find(cmd);
  if (it == replies_.end()) {
    reply = control::encode_error("unknown command: " + cmd);
  } else if (it->second == kCloseWithoutReply) {
    return;
  } else if (it->second == kNeverReply) {
    pollfd p{stop_pipe_[0], POLLIN, 0};
    ::poll(&p, 1, 10000);  // until the test ends (bounded)
    return;
  } else {
    reply = it->second + "\n";
  }
  (void)!::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
}

}  // namespace ferry::test
