// Heartbeats on the bootstrap connection (heartbeat.h).
#include "daemon/peer/heartbeat.h"

#include <span>

namespace ferry::daemon::peer {

HeartbeatStep heartbeat_step(Channel& ch, std::uint64_t now_ns, std::uint32_t heartbeat_ms,
                             std::uint32_t peer_timeout_ms) noexcept {
  HeartbeatStep step;
  const std::uint64_t interval = std::uint64_t{heartbeat_ms} * 1'000'000;
  const std::uint64_t silent = now_ns > ch.last_heard_ns ? now_ns - ch.last_heard_ns : 0;
  if (silent >= std::uint64_t{peer_timeout_ms} * 1'000'000) {
    step.dead = true;
    return step;
  }
  // A ping goes after an interval of silence (below), so an interval is
  // missed when a second one passes without a word.
  if (silent >= interval * (ch.missed + 2)) {
    ++ch.missed;
    step.missed = true;
  }
  // A peer heard within the interval is alive: traffic, its own pings and
  // its pongs prove it, so a busy channel pings only to keep its RTT sample
  // fresh (every kRttEvery intervals), and of an idle pair the side that
  // heard nothing for longer pings: about one exchange per interval, not
  // two. A skipped ping is asked again at the next tick.
  const bool rtt_due = ch.last_ping_ns == 0 || now_ns - ch.last_ping_ns >= kRttEvery * interval;
  if (now_ns >= ch.next_ping_ns && (silent >= interval || rtt_due)) {
    ch.next_ping_ns = now_ns + interval;
    ch.last_ping_ns = now_ns;
    step.ping = true;
  }
  return step;
}

bool post_on_bootstrap(transport::Transport& t, Channel& ch, const wire::Header& h) noexcept {
  if (ch.bootstrap == transport::kInvalidConn) return false;
  transport::SendWr wr;
  wr.conn = ch.bootstrap;
  wr.header = h;
  wr.signaled = false;
  if (t.post_send(std::span<const transport::SendWr>(&wr, 1)).accepted != 1) return false;
  ++ch.bootstrap_stats.tx_msgs;
  ch.bootstrap_stats.tx_bytes += wire::kHeaderBytes;
  return true;
}

wire::Header ping_header(std::uint64_t now_ns) noexcept {
  wire::Header h;
  h.type = wire::MsgType::Heartbeat;
  h.token = now_ns == 0 ? 1 : now_ns;
  return h;
}

bool take_heartbeat(Channel& ch, const wire::Header& h, std::uint64_t now_ns, wire::Header& pong) noexcept {
  if (h.ack != 0) {  // our ping came back
    if (now_ns >= h.token) ch.rtt_us = (now_ns - h.token) / 1000;
    return false;
  }
  pong = wire::Header{};
  pong.type = wire::MsgType::Heartbeat;
  pong.token = h.token;
  pong.ack = 1;
  return true;
}

}  // namespace ferry::daemon::peer
