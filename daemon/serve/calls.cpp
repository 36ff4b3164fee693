#include "daemon/serve/calls.h"

#include <algorithm>
#include <cstring>

#include "daemon/peer/channel_manager.h"

namespace ferry::daemon {

Calls::Calls(Sessions& sessions, peer::ChannelManager& peers, Deadlines& deadlines, Counters& counters,
             std::uint64_t token_key, std::uint32_t lane_max_message)
    : sessions_(sessions),
      peers_(peers),
      replier_(sessions, peers, counters, lane_max_message),
      deadlines_(deadlines),
      counters_(counters),
      table_(token_key, 4096) {}

std::uint64_t Calls::open(PendingCall call) {
  deadlines_.note(call.deadline_ns);
  bump(counters_.calls);
  return table_.insert(call);
}

void Calls::reply(ClientSession& server, const Operation& op) {
  PendingCall* found = table_.find(op.token);
  if (found == nullptr || found->server != server.id()) {
    bump(counters_.bad_requests);
    sessions_.complete(server, shm::Op::Reply, op.user_data, Status::BadRequest);
    return;
  }
  const PendingCall call = *found;
  if (call.remote_channel != 0) {
    // Busy (no room toward the caller): the call stays open for another
    // Reply or its timeout. Otherwise a token is good for one reply.
    if (replier_.reply(server, op, call) != Status::Busy) table_.erase(op.token);
    return;
  }
  table_.erase(op.token);  // a token is good for one reply
  reply_local(server, op, call);
}

void Calls::reply_local(ClientSession& server, const Operation& op, const PendingCall& call) {
  ClientSession* caller = call.caller_gone ? nullptr : sessions_.find(call.caller);
  if (caller == nullptr) {
    sessions_.complete(server, shm::Op::Reply, op.user_data, Status::CallerGone);
    return;
  }
  if (op.length > call.resp_length) {
    // Both sides learn it; the caller's length says what it would have needed.
    sessions_.complete(*caller, shm::Op::Call, call.user_data, Status::ResponseTooLarge, 0, op.length);
    sessions_.complete(server, shm::Op::Reply, op.user_data, Status::ResponseTooLarge);
    return;
  }
  if (op.length != 0) {
    std::memcpy(caller->at(call.resp_offset), server.at(op.offset), op.length);
    bump(counters_.bytes_copied, op.length);
  }
  bump(counters_.replies);
  sessions_.complete(*caller, shm::Op::Call, call.user_data, Status::Ok, 0, op.length);
  sessions_.complete(server, shm::Op::Reply, op.user_data, Status::Ok);
}

void Calls::caller_closed(ClientSession& caller, std::uint32_t endpoint) {
  table_.sweep([&](PendingCall& call) {
    if (call.remote_channel == 0 && call.caller == caller.id() && call.endpoint == endpoint && !call.caller_gone) {
      call.caller_gone = true;  // the late reply gets CallerGone
      sessions_.complete(caller, shm::Op::Call, call.user_data, Status::Cancelled);
    }
    return false;
  });
}

void Calls::client_gone(ClientSession& gone) {
  const std::uint32_t id = gone.id();
  table_.sweep([&](PendingCall& call) {
    if (call.server == id && call.remote_channel != 0) {
      if (!call.caller_gone)
        peers_.answer(call.remote_channel, call.lane, call.remote_ep, call.remote_token, Status::ServiceGone);
      return true;
    }
    if (call.server == id) {
      // The server died before replying: the caller hears ServiceGone.
      ClientSession* caller = call.caller_gone ? nullptr : sessions_.find(call.caller);
      if (caller != nullptr && caller != &gone) {
        sessions_.complete(*caller, shm::Op::Call, call.user_data, Status::ServiceGone);
      }
      return true;
    }
    if (call.remote_channel == 0 && call.caller == id) call.caller_gone = true;  // a later reply gets CallerGone
    return false;
  });
}

void Calls::proxy_closed(std::uint32_t channel, std::uint32_t proxy) {
  table_.sweep([&](PendingCall& call) {
    if (call.remote_channel != channel || call.endpoint != proxy || call.caller_gone) return false;
    call.caller_gone = true;
    peers_.answer(channel, call.lane, call.remote_ep, call.remote_token, Status::Cancelled);
    return false;
  });
}

void Calls::channel_down(std::uint32_t channel) {
  table_.sweep([channel](PendingCall& call) {
    if (call.remote_channel == channel) call.caller_gone = true;
    return false;
  });
}

Sweep Calls::expire(std::uint64_t now_ns) {
  Sweep out;
  // The record stays (the server still holds the token); caller_gone makes
  // its Reply complete CallerGone.
  table_.sweep([&](PendingCall& call) {
    if (call.deadline_ns == 0 || call.caller_gone) return false;
    if (now_ns < call.deadline_ns) {
      out.next_ns = std::min(out.next_ns, call.deadline_ns);
      return false;
    }
    call.caller_gone = true;
    ++out.expired;
    bump(counters_.call_timeouts);
    if (call.remote_channel != 0) {
      peers_.answer(call.remote_channel, call.lane, call.remote_ep, call.remote_token, Status::Timeout);
    } else {
      sessions_.complete(call.caller, shm::Op::Call, call.user_data, Status::Timeout);
    }
    return false;
  });
  return out;
}

}  // namespace ferry::daemon
