// Liveness and ending channels. Heartbeats go on the bootstrap connection
// every heartbeat_ms: a ping is Heartbeat(token = send time, ack 0), the
// pong echoes the token with ack 1, which gives the RTT. Anything heard from
// the peer counts as life; after peer_timeout_ms of silence the channel
// fails with PeerReset, so a peer that hangs without a TCP reset is still
// found. A handshake that has not finished by connect_timeout_ms fails with
// PeerUnreachable.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/peer/channel_manager.h"

namespace ferry::daemon::peer {

void ChannelManager::set_state(Channel& ch, ChannelState to, std::uint64_t now_ns) {
  if (!can_transition(ch.state, to)) {
    spdlog::error("channel {}: illegal transition {} -> {} refused", ch.id, to_string(ch.state), to_string(to));
    return;
  }
  spdlog::info("channel {} ({}{}): {} -> {}", ch.id, ch.address.empty() ? "accepted" : ch.address.c_str(),
               ch.peer_epoch == 0 ? "" : fmt::format(", epoch {:#018x}", ch.peer_epoch), to_string(ch.state),
               to_string(to));
  ch.state = to;
  ch.state_since_ns = now_ns;
  changed_ = true;
}

std::size_t ChannelManager::tick(std::uint64_t now_ns) {
  last_now_ns_ = now_ns;
  std::size_t work = 0;
  for (auto& [id, ch] : channels_) {
    if (ch->finished()) continue;
    if (ch->state == ChannelState::Connecting || ch->state == ChannelState::Handshaking) {
      if (now_ns >= ch->deadline_ns) {
        spdlog::warn("channel {} ({}): handshake did not finish within {} ms", ch->id, ch->address,
                     cfg_.connect_timeout_ms);
        fail(*ch, Status::PeerUnreachable, now_ns);
        ++work;
      }
      continue;
    }
    heartbeat(*ch, now_ns);
    rebuild_tick(*ch, now_ns);
    credit_tick(*ch);
    if (ch->unused_since_ns != 0) close_if_unused(*ch, now_ns);
  }
  reap();
  return work;
}

void ChannelManager::heartbeat(Channel& ch, std::uint64_t now_ns) {
  const std::uint64_t interval = std::uint64_t{cfg_.heartbeat_ms} * 1'000'000;
  const std::uint64_t silent = now_ns > ch.last_heard_ns ? now_ns - ch.last_heard_ns : 0;
  if (silent >= std::uint64_t{cfg_.peer_timeout_ms} * 1'000'000) {
    spdlog::warn("channel {} ({}): peer silent for {} ms; declaring it dead", ch.id, ch.address, silent / 1'000'000);
    fail(ch, Status::PeerReset, now_ns);
    return;
  }
  if (silent >= interval * (ch.missed + 1)) {
    ++ch.missed;
    bump(counters_.heartbeats_missed);
  }
  if (now_ns < ch.next_ping_ns) return;
  ch.next_ping_ns = now_ns + interval;
  wire::Header h;
  h.type = wire::MsgType::Heartbeat;
  h.token = now_ns == 0 ? 1 : now_ns;
  transport::SendWr wr;
  wr.conn = ch.bootstrap;
  wr.header = h;
  wr.signaled = false;
  if (transport_.post_send(std::span<const transport::SendWr>(&wr, 1)).accepted == 1) {
    ++ch.bootstrap_stats.tx_msgs;
    ch.bootstrap_stats.tx_bytes += wire::kHeaderBytes;
  }
}

void ChannelManager::on_heartbeat(Channel& ch, const wire::Header& h, std::uint64_t now_ns) {
  if (h.ack != 0) {  // our ping came back
    if (now_ns >= h.token) ch.rtt_us = (now_ns - h.token) / 1000;
    return;
  }
  wire::Header pong;
  pong.type = wire::MsgType::Heartbeat;
  pong.token = h.token;
  pong.ack = 1;
  transport::SendWr wr;
  wr.conn = ch.bootstrap;
  wr.header = pong;
  wr.signaled = false;
  if (transport_.post_send(std::span<const transport::SendWr>(&wr, 1)).accepted == 1) {
    ++ch.bootstrap_stats.tx_msgs;
    ch.bootstrap_stats.tx_bytes += wire::kHeaderBytes;
  }
}

void ChannelManager::say_goodbye(Channel& ch, Status why) noexcept {
  if (ch.bootstrap == transport::kInvalidConn) return;
  wire::Header bye;
  bye.type = wire::MsgType::Goodbye;
  bye.status = why;
  transport::SendWr wr;
  wr.conn = ch.bootstrap;
  wr.header = bye;
  wr.signaled = false;
  const transport::PostResult r = transport_.post_send(std::span<const transport::SendWr>(&wr, 1));
  // Best effort: the connection closes right after, which the peer sees
  // as the channel ending either way; only the reason in its log is lost.
  if (r.accepted != 1) spdlog::debug("channel {}: Goodbye not sent ({})", ch.id, to_string(r.status));
}

void ChannelManager::fail(Channel& ch, Status why, std::uint64_t now_ns) {
  if (ch.finished()) return;
  bump(counters_.peer_failures);
  finish(ch, why, false, now_ns);
}

void ChannelManager::finish(Channel& ch, Status why, bool orderly, std::uint64_t now_ns) {
  if (ch.finished()) return;
  if (orderly) say_goodbye(ch, Status::Ok);
  // Forget the connections first: their Closed completions then find no
  // channel, and the channel is reported down exactly once, here.
  auto drop = [this](transport::ConnId c, bool on_lanes) {
    if (c == transport::kInvalidConn) return;
    conns_.erase(key(c, on_lanes));
    via(on_lanes).close(c);
  };
  drop(ch.bootstrap, false);  // a connect under way is abandoned
  for (std::uint32_t i = 0; i < kMaxLanes; ++i) drop(ch.lanes[i].conn, true);
  if (auto it = by_address_.find(ch.address); it != by_address_.end() && it->second == ch.id) {
    // Later Opens to this address use the peer's other channel if it has one
    // (else they would dial a fresh duplicate).
    if (Channel* next = successor(ch)) {
      it->second = next->id;
    } else {
      by_address_.erase(it);
    }
  }
  set_state(ch, orderly ? ChannelState::Down : ChannelState::Failed, now_ns);
  if (!orderly) defer_redial(ch, now_ns);
  // WRs waiting for credits fail before the channel is reported down, so
  // the engine settles them (zero-copy holds) while the ops still exist.
  fail_backlog(ch);
  events_.on_channel_down(ch, why);
  finished_.push_back(ch.id);
}

void ChannelManager::defer_redial(const Channel& ch, std::uint64_t now_ns) {
  if (!ch.initiated || ch.address.empty()) return;  // we only redial what we dialled
  constexpr std::uint64_t kMinNs = 100'000'000, kMaxNs = 2'000'000'000;
  Redial& r = redial_[ch.address];
  // A channel that was Up and died: one quick retry interval. One that never
  // came up: the interval doubles with each failure in a row.
  r.delay_ns = ch.was_up ? kMinNs : std::clamp(r.delay_ns * 2, kMinNs, kMaxNs);
  r.not_before_ns = now_ns + r.delay_ns;
  spdlog::info("channel {} to {}: next dial not before {} ms from now", ch.id, ch.address, r.delay_ns / 1'000'000);
}

void ChannelManager::reap() {
  for (std::uint32_t id : finished_) channels_.erase(id);
  finished_.clear();
}

}  // namespace ferry::daemon::peer
