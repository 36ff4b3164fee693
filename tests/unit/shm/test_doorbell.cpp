// Doorbell: an eventfd or a pipe end that never blocks on ring and coalesces rings.
#include <catch2/catch.hpp>

#include <fcntl.h>

#include <chrono>
#include <thread>

#include "shm/doorbell.h"

using namespace ferry::shm;

TEST_CASE("doorbell rings, coalesces and drains", "[doorbell]") {
  auto r = Doorbell::create();
  REQUIRE(r);
  Doorbell bell = std::move(r.value);
  REQUIRE(bell.valid());
  REQUIRE((::fcntl(bell.fd(), F_GETFL) & O_NONBLOCK) != 0);
  REQUIRE(::fcntl(bell.fd(), F_GETFD) == FD_CLOEXEC);

  REQUIRE_FALSE(bell.wait(0));
  bell.ring();
  bell.ring();
  bell.ring();
  REQUIRE(bell.wait(0));
  REQUIRE_FALSE(bell.wait(0));  // one wait consumed all three rings
  bell.ring();
  bell.drain();
  REQUIRE_FALSE(bell.wait(0));
  bell.drain();  // draining an empty doorbell does not block
}

TEST_CASE("doorbell wait times out and wakes across threads", "[doorbell]") {
  Doorbell bell = std::move(Doorbell::create().value);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE_FALSE(bell.wait(50));
  REQUIRE(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(45));

  std::thread ringer([&bell] { bell.ring(); });
  REQUIRE(bell.wait(10000));
  ringer.join();
}

TEST_CASE("doorbell moves own the fd", "[doorbell]") {
  Doorbell a = std::move(Doorbell::create().value);
  const int fd = a.fd();
  Doorbell b(std::move(a));
  REQUIRE_FALSE(a.valid());
  REQUIRE(b.fd() == fd);
  { Doorbell c = std::move(b); }
  REQUIRE(::fcntl(fd, F_GETFD) == -1);
}

TEST_CASE("a ringer pipe never blocks its ringer, whatever the other end does", "[doorbell]") {
  auto r = Doorbell::create_ringer_pipe();
  REQUIRE(r);
  Doorbell ours = std::move(r.value);
  REQUIRE(ours.peer_fd() >= 0);
  Doorbell theirs(::fcntl(ours.peer_fd(), F_DUPFD_CLOEXEC, 0));  // what the other process receives
  ours.release_peer();
  REQUIRE(ours.peer_fd() == -1);

  // The other side clears O_NONBLOCK on its end: its open file description
  // only, never ours.
  REQUIRE(::fcntl(theirs.fd(), F_SETFL, ::fcntl(theirs.fd(), F_GETFL) & ~O_NONBLOCK) == 0);
  REQUIRE((::fcntl(ours.fd(), F_GETFL) & O_NONBLOCK) != 0);

  ours.ring();
  REQUIRE(theirs.wait(0));
  REQUIRE_FALSE(theirs.wait(0));

  // Never read: the pipe fills and further rings return at once.
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20000; ++i) ours.ring();  // 160 KB of rings into a 64 KiB pipe
  REQUIRE(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  int wakes = 0;  // each drain is bounded; a few of them empty the pipe
  while (theirs.wait(0) && wakes < 100) ++wakes;
  REQUIRE(wakes >= 1);
  REQUIRE(wakes < 100);
}
