#include "daemon/engines/compaction.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

using namespace ferry::daemon;

TEST_CASE("busy window: the share of each closed window, then a fresh one", "[compaction]") {
  BusyWindow w;
  w.restart(1'000);
  CHECK_FALSE(w.closes(1'000 + kCompactWindowNs - 1));
  CHECK(w.closes(1'000 + kCompactWindowNs));
  w.add(kCompactWindowNs / 4);
  CHECK(w.close(1'000 + kCompactWindowNs) == 250);
  CHECK(w.permille() == 250);
  // The next window starts empty; a window longer than its length (a
  // sleep) dilutes its busy time.
  w.add(kCompactWindowNs / 10);
  CHECK(w.close(1'000 + 3 * kCompactWindowNs) == 50);
  // Busy time beyond the window (a turn that ran over it) counts as all of it.
  w.add(5 * kCompactWindowNs);
  CHECK(w.close(1'000 + 4 * kCompactWindowNs) == 1000);
}

TEST_CASE("host inbox: offers gather until taken; once closed they fail and the rest come back", "[compaction]") {
  HostInbox in;
  CHECK_FALSE(in.pending());
  CHECK(in.offer(1));
  CHECK(in.offer(63));
  CHECK(in.pending());
  CHECK(in.take() == ((std::uint64_t{1} << 1) | (std::uint64_t{1} << 63)));
  CHECK_FALSE(in.pending());
  CHECK(in.take() == 0);
  CHECK(in.offer(2));
  CHECK(in.close() == (std::uint64_t{1} << 2));
  CHECK_FALSE(in.offer(3));
  CHECK_FALSE(in.pending());
}

TEST_CASE("engine baton: the own thread waits while hosted and sees what the host did", "[compaction]") {
  EngineBaton baton;
  HostInbox inbox;
  int state = 0;  // an engine's state: touched by one thread at a time
  std::atomic<bool> back{false};
  std::thread own([&] {
    state = 1;
    baton.hand_over();
    REQUIRE(inbox.offer(1));
    baton.wait_until_back();
    back = true;
    CHECK(state == 2);  // the host's write, ordered by the baton
    state = 3;
  });
  while (!inbox.pending()) std::this_thread::yield();
  REQUIRE(inbox.take() == 2);
  CHECK(state == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(back.load());  // still waiting: the host runs the engine
  state = 2;
  baton.hand_back();
  own.join();
  CHECK(back.load());
  CHECK(state == 3);
}
