// Control-socket client over a blocking Unix stream socket; waits with poll
// so a daemon that accepts but never answers cannot hang the caller.
#include "control/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ferry/error.h"

namespace ferry::control {
namespace {

using Clock = std::chrono::steady_clock;

// Closes the fd on every return path.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

CallResult failure(CallStatus s, std::string msg) {
  CallResult r;
  r.status = s;
  r.error = std::move(msg);
  return r;
}

std::string errno_text(int err) { return std::strerror(err); }

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(left);
}

// Waits for `events` on fd until the deadline: Timeout when it passes,
// PeerReset (poll's reason) when poll fails.
Error wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return {};
    if (n == 0) return Error(Status::Timeout, "timed out");
    if (errno != EINTR) return Error(Status::PeerReset, "poll: " + errno_text(errno));
  }
}

}  // namespace

std::string_view to_string(CallStatus s) noexcept {
  switch (s) {
    case CallStatus::Ok: return "Ok";
    case CallStatus::DaemonError: return "DaemonError";
    case CallStatus::ConnectFailed: return "ConnectFailed";
    case CallStatus::IoError: return "IoError";
    case CallStatus::Timeout: return "Timeout";
    case CallStatus::BadResponse: return "BadResponse";
  }
  return "Unknown";
}

CallResult call(const std::string& socket_path, const Request& request, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    return failure(CallStatus::ConnectFailed, "cannot connect to " + socket_path + ": invalid socket path length");
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());

  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return failure(CallStatus::ConnectFailed, "socket: " + errno_text(errno));
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return failure(CallStatus::ConnectFailed, "cannot connect to " + socket_path + ": " + errno_text(errno));

  const std::string line = encode_request(request);
  if (line.size() > kMaxLineBytes) return failure(CallStatus::BadResponse, "request longer than the line limit");
  std::size_t sent = 0;
  while (sent < line.size()) {
    if (const Error waited = wait_for(fd.get(), POLLOUT, deadline); waited.failed()) {
      return waited.status() == Status::Timeout ? failure(CallStatus::Timeout, "timed out sending to " + socket_path)
                                                : failure(CallStatus::IoError, waited.message());
    }
    const ssize_t n = ::send(fd.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return failure(CallStatus::IoError, "send to " + socket_path + ": " + errno_text(errno));
    }
    sent += static_cast<std::size_t>(n);
  }

  LineReader reader;
  std::string reply;
  char buf[4096];
  for (;;) {
    const auto state = reader.next(&reply);
    if (state == LineReader::State::Line) break;
    if (state == LineReader::State::TooLong) {
      return failure(CallStatus::BadResponse, "response longer than " + std::to_string(kMaxLineBytes) + " bytes");
    }
    if (const Error waited = wait_for(fd.get(), POLLIN, deadline); waited.failed()) {
      return waited.status() == Status::Timeout
                 ? failure(CallStatus::Timeout, "timed out waiting for a response from " + socket_path)
                 : failure(CallStatus::IoError, waited.message());
    }
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return failure(CallStatus::IoError, "recv from " + socket_path + ": " + errno_text(errno));
    }
    if (n == 0) return failure(CallStatus::IoError, "daemon closed the connection without answering");
    reader.feed(std::string_view(buf, static_cast<std::size_t>(n)));
  }

  Response resp;
  if (Error e = decode_response(reply, &resp); e.failed()) {
    return failure(CallStatus::BadResponse, "bad response: " + e.message());
  }
  if (!resp.ok) return failure(CallStatus::DaemonError, resp.error);
  CallResult r;
  r.status = CallStatus::Ok;
  r.result = std::move(resp.result);
  return r;
}

CallResult call(const std::string& socket_path, Command command, std::chrono::milliseconds timeout) {
  return call(socket_path, make_request(command), timeout);
}

}  // namespace ferry::control
