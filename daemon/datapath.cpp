#include "daemon/datapath.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

#include "daemon/loop/engine_fault.h"
#include "daemon/peer/auth_secret.h"
#include "daemon/remote/wr_tag.h"

namespace ferry::daemon {

namespace {

peer::ChannelConfig channel_config(const Config& config, std::uint64_t epoch, std::uint32_t lane_max_message) {
  peer::ChannelConfig cc;
  cc.epoch = epoch;
  cc.heartbeat_ms = config.heartbeat_ms;
  cc.peer_timeout_ms = config.peer_timeout_ms;
  cc.connect_timeout_ms = config.connect_timeout_ms;
  cc.lanes = config.channel_conns;
  cc.max_channels = config.max_channels;
  cc.receive_pool = config.receive_pool;
  cc.credit_floor = config.credit_floor;
  cc.credit_share = config.credit_share;
  cc.max_message_bytes = std::max<std::uint32_t>(lane_max_message, wire::kMinMessageBytes);
  if (const Error bad = peer::load_auth_secret(config.auth_secret_file, cc.auth_secret); bad.failed())
    throw std::runtime_error(bad.message());  // start-up: the daemon cannot run without its secret
  return cc;
}

EngineFault fault_of(const Config& config) {
  EngineFault f;
  f.forget_call_after = config.fault_forget_call_after;
  if (f.armed()) {
    spdlog::warn(
        "engine: TEST-ONLY FAULT INJECTION ARMED ({}=forget-call-after={}): remote Call #{} will be "
        "forgotten (never delivered nor answered)",
        kEngineFaultEnv, f.forget_call_after, f.forget_call_after);
  }
  return f;
}

}  // namespace

Datapath::Datapath(const Config& config, Counters& counters, std::uint64_t token_key, std::uint64_t epoch,
                   EngineGroup& group, std::uint32_t index, Transports& transports)
    : deadlines(config.delivery_timeout_ms, config.peer_timeout_ms),
      sessions(counters, config.max_clients),
      peers(std::make_unique<peer::ChannelManager>(*transports.bootstrap, static_cast<peer::ChannelEvents&>(*this),
                                                   channel_config(config, epoch, transports.lane_max_message), counters,
                                                   transports.lanes.get())),
      parking(sessions, deadlines, counters),
      remote(config, sessions, *peers, parking, deadlines, transports.keys, counters, transports.remote_access(),
             transports.lane_max_message),
      calls(sessions, *peers, deadlines, counters, token_key, transports.lane_max_message),
      local(sessions, calls, counters, group.directory, index),
      proxy(config, *peers, sessions, local, calls, deadlines, counters, fault_of(config), group, index),
      forwarder(sessions, counters),
      router(config, group, index, sessions, local, remote, forwarder, counters),
      dispatcher(config, sessions, parking, deadlines, local, calls, remote, router, forwarder, counters),
      index_(index),
      transports_(transports) {
  sessions.set_shadow_sink(&forwarder);
  remote.set_redirects(&router);
  peers->set_rails(transports.rails);  // several rails: lanes spread over them
}

std::size_t Datapath::poll_submissions() {
  std::size_t work = 0;
  // An empty ring costs one load, not a call (the common case: most
  // clients have nothing new in a given turn).
  for (ClientSession* c : sessions.all())
    if (c->sq.pending()) work += dispatcher.poll(*c);
  return work;
}

std::size_t Datapath::expire() {
  const std::uint64_t now = deadlines.now();
  Sweep s = calls.expire(now);
  s.merge(remote.expire(now));
  deadlines.swept(s.next_ns);
  return s.expired;
}

bool Datapath::detach(std::uint32_t id) {
  ClientSession* c = sessions.find(id);
  if (c == nullptr) return false;  // already gone (the engine kicked it, then the hang-up arrived)
  calls.client_gone(*c);
  calls.replier().client_gone(id);
  remote.client_gone(*c);
  local.client_gone(*c);
  parking.client_gone(id);
  // Another engine's client: its shadow here ends (and tells its origin
  // once nothing here names its memory: Sessions::destroy). Our own: each
  // engine with a shadow of it ends that too.
  if (!c->is_shadow()) forwarder.client_gone(*c);
  // Unmaps the segment (and deregisters its MR) now, or once the rdma WRs,
  // peer accesses and other engines' shadows that name its memory have ended.
  sessions.remove(id);
  return true;
}

void Datapath::on_channel_up(peer::Channel& ch) { remote.on_channel_up(ch); }

void Datapath::on_slot_freed() { remote.slot_freed(); }

bool Datapath::channel_idle(const peer::Channel& ch) { return !remote.has_ops_on(ch.id); }

void Datapath::on_channel_down(peer::Channel& ch, Status why) {
  // Exactly once per channel: everything that depended on it ends.
  remote.channel_down(ch, why);
  calls.replier().channel_down(ch.id);
  calls.channel_down(ch.id);
  proxy.channel_down(ch.id);
}

void Datapath::on_message(peer::Channel& ch, std::uint32_t lane, const wire::Header& h, const std::byte* payload) {
  switch (h.type) {
    case wire::MsgType::Open: proxy.on_open(ch, lane, h, payload); break;
    case wire::MsgType::OpenAck: remote.on_open_ack(ch, h); break;
    case wire::MsgType::Close: proxy.on_close(ch, h); break;
    case wire::MsgType::Send:
    case wire::MsgType::Call:
    case wire::MsgType::RendezvousReq: proxy.on_delivery(ch, lane, h, payload); break;
    case wire::MsgType::Response: remote.on_response(ch, h, payload); break;
    case wire::MsgType::WriteDone: remote.on_write_done(ch, h); break;
    case wire::MsgType::RailKeys: peers->on_rail_keys(ch, lane, h, payload); break;
    default:
      // Types this daemon does not speak on a lane: a peer that sends them
      // anyway is ignored rather than trusted.
      spdlog::debug("channel {}: ignoring {}", ch.id, to_string(h.type));
      break;
  }
}

void Datapath::on_send_done(std::uint64_t user_data, Status status) {
  WrTag tag = WrTag::decode(user_data);
  // A WR that named a client's memory: releases the client's hold first.
  if (tag.kind == WrKind::ZeroCopy) tag = WrTag::decode(sessions.wr_done(user_data));
  switch (tag.kind) {
    case WrKind::RemoteOp: remote.on_send_done(tag.token(), status); break;
    case WrKind::Reply: calls.replier().on_send_done(tag.token(), status); break;
    case WrKind::Read: proxy.on_read_done(tag.slot, tag.generation, status); break;
    case WrKind::ZeroCopy:
    case WrKind::None: break;  // untracked (answers, acks), or a slot already settled
  }
}

}  // namespace ferry::daemon
