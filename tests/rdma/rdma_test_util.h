// Helpers of the real-verbs tests: two RdmaTransports (rxe0/ADDR0 and
// rxe1/ADDR1) connected in one process, and polling with deadlines.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/rdma/rdma_transport.h"

namespace ferry::transport::rdma::test {

using Clock = std::chrono::steady_clock;

inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

// Generous transport timers: rxe under TCG emulation retransmits (docs/testing.md).
inline RdmaConfig vm_config(const std::string& dev, const std::string& addr) {
  RdmaConfig c;
  c.device = dev;
  c.address = addr;
  c.max_connections = 4;
  c.ack_timeout = 18;
  c.retry_cnt = 7;
  c.connect_timeout_ms = 20000;
  return c;
}

inline std::unique_ptr<RdmaTransport> make(const std::string& dev, const std::string& addr) {
  auto t = RdmaTransport::create(vm_config(dev, addr));
  INFO("create on " << dev << " / " << addr << ": " << to_string(t.status));
  REQUIRE(t.status == Status::Ok);
  return std::move(t.value);
}

// Polls `t` into `sink` until pred() holds or the deadline passes.
inline bool pump_until(std::initializer_list<std::pair<Transport*, std::vector<Completion>*>> ts,
                       const std::function<bool()>& pred, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  std::array<Completion, kPollBatch> buf{};
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    for (auto& [t, sink] : ts) {
      const std::size_t n = t->poll(buf);
      sink->insert(sink->end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    }
  }
  return true;
}

struct Pair {
  std::unique_ptr<RdmaTransport> a;  // listener, rxe0
  std::unique_ptr<RdmaTransport> b;  // connector, rxe1
  ConnId a_conn = kInvalidConn;
  ConnId b_conn = kInvalidConn;
  std::uint16_t port = 0;  // a's listening port
};

// b connects to a (`listener` when given, else made with vm_config on
// rxe0). connect() blocks until rdma_cm completes, which needs a polled
// meanwhile, so the connect runs on a helper thread.
inline Pair connect_pair(std::unique_ptr<RdmaTransport> listener = nullptr) {
  Pair p;
  p.a = listener != nullptr ? std::move(listener) : make(env_or("RXE0", "rxe0"), env_or("ADDR0", "198.18.0.1"));
  p.b = make(env_or("RXE1", "rxe1"), env_or("ADDR1", "198.18.0.2"));
  auto port = p.a->listen(env_or("ADDR0", "198.18.0.1"), 0);
  REQUIRE(port.status == Status::Ok);
  REQUIRE(port.value != 0);
  p.port = port.value;
  Result<ConnId> res;
  bool done = false;
  std::thread th([&] {
    res = p.b->connect(env_or("ADDR0", "198.18.0.1"), port.value);
    p.b->release_owner();
    done = true;  // read only after join()
  });
  std::vector<Completion> got;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  std::array<Completion, kPollBatch> buf{};
  while (Clock::now() < deadline && p.a_conn == kInvalidConn) {
    const std::size_t n = p.a->poll(buf);
    for (std::size_t i = 0; i < n; ++i) {
      if (buf[i].kind == CompletionKind::Accepted) p.a_conn = buf[i].conn;
    }
  }
  th.join();
  REQUIRE(done);
  INFO("connect: " << to_string(res.status));
  REQUIRE(res.status == Status::Ok);
  REQUIRE(p.a_conn != kInvalidConn);
  p.b_conn = res.value;
  return p;
}

// Reads one counter of `rdma statistic show link DEV/1`; -1 when unavailable.
inline long rdma_counter(const std::string& dev, const std::string& name) {
  const std::string cmd = "rdma statistic show link " + dev + "/1 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return -1;
  std::string all;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f) != nullptr) all += buf;
  pclose(f);
  const auto at = all.find(" " + name + " ");
  if (at == std::string::npos) return -1;
  return std::strtol(all.c_str() + at + name.size() + 2, nullptr, 10);
}

}  // namespace ferry::transport::rdma::test
