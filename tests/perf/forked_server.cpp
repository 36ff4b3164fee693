#include "forked_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ferry::bench {

void ReadyNotifier::ready(const std::string& info) {
  const std::string line = "ok " + info + "\n";
  [[maybe_unused]] auto n = ::write(fd_, line.data(), line.size());
}

void ReadyNotifier::failed(const std::string& why) {
  const std::string line = "err " + why + "\n";
  [[maybe_unused]] auto n = ::write(fd_, line.data(), line.size());
}

namespace {

// pipe() or fork() failing: out of descriptors, processes or memory, unless
// the system forbids it.
Error sys_error(const char* what) {
  const int e = errno;
  const Status status = e == EACCES || e == EPERM ? Status::PermissionDenied : Status::NoMemory;
  return Error(status, std::string(what) + ": " + std::strerror(e));
}

}  // namespace

ForkedServer::~ForkedServer() {
  if (pid_ > 0) stop(std::chrono::milliseconds(0));
  if (ready_fd_ >= 0) ::close(ready_fd_);
  request_stop();
}

void ForkedServer::request_stop() {
  if (stop_write_fd_ >= 0) ::close(stop_write_fd_);
  stop_write_fd_ = -1;
}

Error ForkedServer::start(const std::function<int(ReadyNotifier&)>& body) {
  int fds[2];
  int stop_fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return sys_error("pipe");
  if (::pipe2(stop_fds, O_CLOEXEC) != 0) {
    Error e = sys_error("pipe");
    ::close(fds[0]);
    ::close(fds[1]);
    return e;
  }
  std::fflush(stdout);  // the child must not replay buffered output
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    Error e = sys_error("fork");
    for (const int fd : {fds[0], fds[1], stop_fds[0], stop_fds[1]}) ::close(fd);
    return e;
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::close(stop_fds[1]);
    ReadyNotifier notifier(fds[1], stop_fds[0]);
    const int rc = body(notifier);
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(rc);
  }
  ::close(fds[1]);
  ::close(stop_fds[0]);
  pid_ = pid;
  ready_fd_ = fds[0];
  stop_write_fd_ = stop_fds[1];
  return {};
}

Error ForkedServer::wait_ready(std::chrono::milliseconds timeout, std::string* info) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string line;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Error(Status::Timeout, "server did not become ready in time");
    pollfd p{ready_fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char c = 0;
    const ssize_t n = ::read(ready_fd_, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error(Status::PeerUnreachable, "server exited before it was ready");
    if (c != '\n') {
      line.push_back(c);
      continue;
    }
    if (line.rfind("ok ", 0) == 0) {
      if (info) *info = line.substr(3);
      return {};
    }
    return Error(Status::PeerUnreachable, "server failed: " + (line.size() > 4 ? line.substr(4) : line));
  }
}

namespace {

// Waits up to `timeout` for the child to exit, on a pidfd when the kernel
// has them (an exit is then a readable fd, no polling loop).
bool reap_within(pid_t pid, std::chrono::milliseconds timeout, int* status) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const pid_t r = ::waitpid(pid, status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      if (pidfd >= 0) ::close(pidfd);
      return false;
    }
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
    } else {
      ::usleep(1000);  // no pidfd: bounded by the deadline above
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  return true;
}

}  // namespace

int ForkedServer::stop(std::chrono::milliseconds grace) {
  request_stop();
  if (pid_ <= 0) return 0;
  int status = 0;
  if (!reap_within(pid_, grace, &status)) {
    ::kill(pid_, SIGTERM);
    if (!reap_within(pid_, std::chrono::seconds(2), &status)) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
  }
  pid_ = -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace ferry::bench
