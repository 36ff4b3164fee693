// Helpers for the tcp transport tests: a connected pair on 127.0.0.1 and
// polling with a deadline (no sleeps as synchronisation).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include "transport/tcp/tcp_transport.h"

namespace ferry::transport::testing {

using Clock = std::chrono::steady_clock;
using tcp::TcpConfig;
using tcp::TcpTransport;

inline std::unique_ptr<TcpTransport> make_transport(const TcpConfig& cfg = {}) {
  auto r = TcpTransport::create(cfg);
  REQUIRE(r.status == Status::Ok);
  return std::move(r.value);
}

inline std::uint64_t fnv1a(const std::byte* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= std::to_integer<std::uint64_t>(p[i]);
    h *= 1099511628211ull;
  }
  return h | 1;  // never 0
}

// Polls `t` until `pred(completion)` has matched once or the deadline passes.
// Every completion seen is appended to `seen` (when given).
template <typename Pred>
bool poll_for(TcpTransport& t, Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(5),
              std::vector<Completion>* seen = nullptr) {
  const auto deadline = Clock::now() + limit;
  std::array<Completion, kPollBatch> out;
  while (Clock::now() < deadline) {
    const std::size_t n = t.poll(out);
    for (std::size_t i = 0; i < n; ++i) {
      if (seen != nullptr) seen->push_back(out[i]);
      if (pred(out[i])) return true;
    }
  }
  return false;
}

struct ConnectedPair {
  std::unique_ptr<TcpTransport> server;
  std::unique_ptr<TcpTransport> client;
  ConnId server_conn = kInvalidConn;
  ConnId client_conn = kInvalidConn;
  std::uint16_t port = 0;
};

inline ConnectedPair connected_pair(const TcpConfig& server_cfg = {}, const TcpConfig& client_cfg = {}) {
  ConnectedPair p;
  p.server = make_transport(server_cfg);
  p.client = make_transport(client_cfg);
  auto l = p.server->listen("127.0.0.1", 0);
  REQUIRE(l.status == Status::Ok);
  p.port = l.value;
  auto c = p.client->connect("127.0.0.1", p.port);
  REQUIRE(c.status == Status::Ok);
  p.client_conn = c.value;
  REQUIRE(poll_for(*p.server, [&](const Completion& cp) {
    if (cp.kind != CompletionKind::Accepted) return false;
    p.server_conn = cp.conn;
    return true;
  }));
  return p;
}

inline wire::Header send_header(std::uint64_t seq, std::uint64_t token) {
  wire::Header h;
  h.type = wire::MsgType::Send;
  h.src_ep = 1;
  h.dst_ep = 2;
  h.seq = seq;
  h.token = token;
  return h;
}

}  // namespace ferry::transport::testing
