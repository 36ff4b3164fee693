// Channel managers on recording transports for the unit tests of the
// channel layer (credit_test.cpp, rebuild_test.cpp): one scripted side
// (Side), or two daemons back to back (Pair) with a model of each side's
// posted receives that counts any RNR.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "daemon/peer/channel_manager.h"
#include "transport/testing/recording_transport.h"

namespace ferry::daemon::peer::testing {

using transport::testing::RecordingTransport;

constexpr std::uint64_t kMs = 1'000'000;

struct Listener final : ChannelEvents {
  std::vector<std::string> log;  // "up", "down", "done:<user_data>"
  std::vector<std::pair<std::uint32_t, Status>> down;
  std::vector<wire::Header> messages;
  std::vector<std::pair<std::uint64_t, Status>> done;
  void on_channel_up(Channel&) override { log.emplace_back("up"); }
  bool channel_idle(const Channel&) override { return true; }
  void on_channel_down(Channel& ch, Status why) override {
    log.emplace_back("down");
    down.emplace_back(ch.id, why);
  }
  void on_message(Channel&, std::uint32_t, const wire::Header& h, const std::byte*) override { messages.push_back(h); }
  void on_send_done(std::uint64_t user_data, Status status) override {
    log.push_back("done:" + std::to_string(user_data));
    done.emplace_back(user_data, status);
  }
};

inline std::vector<std::byte> handshake(std::uint64_t epoch, std::uint32_t initial_credits) {
  wire::Handshake hs;
  hs.protocol_version = wire::kProtocolVersion;
  hs.qp_count = 1;
  hs.daemon_epoch = epoch;
  hs.capabilities = wire::kCapTcp;
  hs.initial_credits = initial_credits;
  hs.max_message_bytes = 1u << 20;
  std::vector<std::byte> out(wire::handshake_bytes(hs));
  wire::encode_handshake(hs, out);
  return out;
}

inline wire::Header header(wire::MsgType type, std::uint64_t token = 0, std::uint32_t credit = 0) {
  wire::Header h;
  h.type = type;
  h.token = token;
  h.credit = credit;
  if (type == wire::MsgType::Send) h.src_ep = h.dst_ep = 1;
  return h;
}

// One daemon's channel layer on a recording transport.
struct Side {
  RecordingTransport t;
  Listener ev;
  Counters counters;
  std::unique_ptr<ChannelManager> mgr;
  std::uint64_t now = 1000 * kMs;

  // credit_floor != 0: lanes lend from a pool (ChannelConfig), share 64.
  explicit Side(std::uint64_t epoch, std::uint32_t recv_depth = 128, std::uint32_t credit_floor = 0)
      : t(caps(recv_depth)) {
    ChannelConfig cfg;
    cfg.epoch = epoch;
    cfg.heartbeat_ms = 100;
    cfg.peer_timeout_ms = 100'000;
    cfg.connect_timeout_ms = 100'000;
    cfg.lanes = 1;
    if (credit_floor != 0) {
      cfg.credit_floor = credit_floor;
      cfg.credit_share = 64;
      cfg.receive_pool = 64 * credit_floor + 256;  // every connection's floor, and some to lend
    }
    mgr = std::make_unique<ChannelManager>(t, ev, cfg, counters);
  }
  static transport::TransportCaps caps(std::uint32_t recv_depth) {
    transport::TransportCaps c = RecordingTransport::default_caps();
    c.recv_depth = recv_depth;
    return c;
  }
  // As after a wake by the transport: a manager with no channel looks at
  // its transport only every few polls otherwise.
  void pump() {
    mgr->woke(true);
    (void)mgr->poll(now);
  }

  // We connect to a scripted peer that grants `peer_credits`; boot conn 1, lane conn 2.
  std::uint32_t connect_up(std::uint32_t peer_credits) {
    t.set_connect_result(Result<transport::ConnId>::ok(1));
    auto r = mgr->connect("198.18.0.2:7000", "198.18.0.2", 7000, now);
    REQUIRE(r);
    t.set_connect_result(Result<transport::ConnId>::ok(2));
    t.inject_recv(1, header(wire::MsgType::HelloAck), handshake(50, peer_credits));
    pump();
    t.inject_recv(2, header(wire::MsgType::HelloAck, 1), handshake(50, peer_credits));
    pump();
    REQUIRE(mgr->find(r.value) != nullptr);
    REQUIRE(mgr->find(r.value)->state == ChannelState::Up);
    return r.value;
  }
  Lane& lane(std::uint32_t id) { return mgr->find(id)->lanes[0]; }
  transport::PostResult send(std::uint32_t id, std::uint64_t token) {
    return mgr->send(*mgr->find(id), 0, header(wire::MsgType::Send, token), nullptr, 0, token, false);
  }
  std::vector<std::uint64_t> sent_tokens(wire::MsgType type, transport::ConnId conn) const {
    std::vector<std::uint64_t> out;
    for (const auto& s : t.sent()) {
      if (s.conn == conn && s.header.type == type) out.push_back(s.header.token);
    }
    return out;
  }
};

// Two daemons back to back. Each message posted on one side is delivered to
// the other as a Recv (at most kPollBatch per step, so one step is one
// poll); a model of each side's posted receives fails the test on an RNR.
struct Pair {
  Side a;  // initiator: boot conn 1, lane conn 2
  Side b;  // acceptor:  boot conn 11, lane conn 12
  std::size_t a_shipped = 0, b_shipped = 0;
  struct Receives {
    std::int64_t free = 128;     // posted receives of the lane
    std::int64_t in_poll = 0;    // used by messages the last poll returned: reposted by the next
    std::int64_t delivered = 0;  // used, not yet returned by a poll
    std::int64_t min_free = 128;
  };
  Receives a_rx, b_rx;
  std::size_t rnr = 0;

  // `b_depth`: the receiver's receives per lane. A small one (below a poll
  // batch) lets the sender refill faster than the receiver polls, so a
  // grant of a receive not yet reposted shows as an RNR.
  // credit_floor != 0: both sides lend from pools (Side).
  explicit Pair(std::uint32_t b_depth = 128, std::uint32_t credit_floor = 0)
      : a(100, 128, credit_floor), b(200, b_depth, credit_floor) {
    b_rx.free = b_rx.min_free = b_depth;
  }

  static transport::ConnId peer_conn(transport::ConnId c, bool from_a) { return from_a ? c + 10 : c - 10; }
  // Moves what `from` posted since the last call to `to` (at most `max`).
  std::size_t ship(Side& from, std::size_t& shipped, Side& to, Receives& rx, bool from_a, std::size_t max) {
    std::size_t n = 0;
    const auto& sent = from.t.sent();
    for (; shipped < sent.size() && n < max; ++shipped, ++n) {
      const auto& s = sent[shipped];
      const transport::ConnId dst = peer_conn(s.conn, from_a);
      if (s.header.type == wire::MsgType::Hello) {
        transport::Completion acc;
        acc.kind = transport::CompletionKind::Accepted;
        acc.conn = dst;
        to.t.inject(acc);
      }
      if (dst == 2 || dst == 12) {  // a lane: the message uses a receive
        if (rx.free == 0) ++rnr;
        --rx.free;
        rx.min_free = std::min(rx.min_free, rx.free);
        ++rx.delivered;
      }
      to.t.inject_recv(dst, s.header, s.payload);
    }
    return n;
  }
  static void poll(Side& s, Receives& rx) {
    rx.free += rx.in_poll;  // the transport reposts at the start of poll()
    rx.in_poll = std::min<std::int64_t>(rx.delivered, transport::kPollBatch);
    rx.delivered -= rx.in_poll;
    s.pump();
  }
  // One step: each side's new messages cross, both sides poll.
  std::size_t step() {
    std::size_t moved = ship(a, a_shipped, b, b_rx, true, transport::kPollBatch);
    poll(b, b_rx);
    moved += ship(b, b_shipped, a, a_rx, false, transport::kPollBatch);
    poll(a, a_rx);
    return moved;
  }
  // Both sides' clocks move on `ms`, both tick, then one step.
  void quiet_round(std::uint64_t ms) {
    a.now += ms * kMs;
    b.now += ms * kMs;
    a.mgr->tick(a.now);
    b.mgr->tick(b.now);
    step();
  }
  std::uint32_t up() {
    a.t.set_connect_result(Result<transport::ConnId>::ok(1));
    auto r = a.mgr->connect("198.18.0.2:7000", "198.18.0.2", 7000, a.now);
    REQUIRE(r);
    a.t.set_connect_result(Result<transport::ConnId>::ok(2));
    for (int i = 0; i < 10; ++i) step();  // connects complete on a poll (connect_async)
    REQUIRE(a.mgr->find(r.value) != nullptr);
    REQUIRE(a.mgr->find(r.value)->state == ChannelState::Up);
    REQUIRE(b.ev.log == std::vector<std::string>{"up"});
    return r.value;
  }
};

inline std::size_t count(const std::vector<transport::testing::RecordedSend>& sent, wire::MsgType type,
                         std::size_t from = 0) {
  std::size_t n = 0;
  for (std::size_t i = from; i < sent.size(); ++i) n += sent[i].header.type == type;
  return n;
}

}  // namespace ferry::daemon::peer::testing
