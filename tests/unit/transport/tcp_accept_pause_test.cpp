// accept() out of descriptors: the listener pauses
// instead of keeping the transport's event fd readable (an owner sleeping on
// it would otherwise wake on every turn, a core at 100 %), and accepts what
// queued meanwhile once descriptors come back.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/unit/transport/tcp_test_util.h"

using namespace ferry;
using namespace ferry::transport;
using namespace ferry::transport::testing;

namespace {

// The lowest descriptor number not in use: the one the kernel hands out
// next. As RLIMIT_NOFILE it leaves not one to spare. A count of the open
// descriptors would not: a test run from a shell that left holes (an
// inherited fd 10 or 255) could still open one in a hole below the count.
int lowest_free_descriptor() {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  ::close(fd);
  return fd;
}

// How many of `ms` the event fd spent readable, sampled every millisecond.
int readable_ms(int fd, int ms) {
  int readable = 0;
  const auto end = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 1) == 1) {
      ++readable;
      ::usleep(1000);
    }
  }
  return readable;
}

}  // namespace

TEST_CASE("tcp accept out of descriptors: the listener pauses, then accepts what queued") {
  auto server = make_transport();
  auto listened = server->listen("127.0.0.1", 0);
  REQUIRE(listened.status == Status::Ok);
  const std::uint16_t port = listened.value;
  constexpr int kPending = 8;
  int fds[kPending];
  for (int& fd : fds) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
  }
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(lowest_free_descriptor());  // not one descriptor to spare
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int fd : fds) REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);  // queued

  std::array<Completion, kPollBatch> out;
  CHECK(server->poll(out) == 0);  // accept() fails EMFILE: nothing accepted, the listener paused
  CHECK(server->stats().accept_pauses == 1);
  // Before: the listener stayed in the epoll set, readable all along.
  const int readable = readable_ms(server->event_fd(), 50);
  CHECK(readable < 5);
  CHECK(server->poll(out) == 0);
  CHECK(server->stats().accept_pauses == 1);

  REQUIRE(::setrlimit(RLIMIT_NOFILE, &saved) == 0);
  // The pause ends (100 ms first): every queued connection is accepted.
  int accepted = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  while (accepted < kPending && Clock::now() < deadline) {
    pollfd p{server->event_fd(), POLLIN, 0};
    ::poll(&p, 1, 50);  // sleeps as an owner would: the pause's timer wakes it
    const std::size_t n = server->poll(out);
    for (std::size_t i = 0; i < n; ++i) accepted += out[i].kind == CompletionKind::Accepted ? 1 : 0;
  }
  CHECK(accepted == kPending);
  for (int fd : fds) ::close(fd);
}
