// Doorbell: an eventfd that never blocks on ring and coalesces rings.
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
