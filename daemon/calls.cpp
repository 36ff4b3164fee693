// Reply, ReleaseRx, and failing calls when a client goes away.
#include <spdlog/spdlog.h>

#include <cstring>

#include "daemon/engine.h"

namespace ferry::daemon {

void Engine::op_reply(ClientSession& c, const shm::SqEntry& e) {
  PendingCall* found = calls_.find(e.token);
  if (found == nullptr || found->server != c.id()) {
    bump(counters_.bad_requests);
    complete(c, shm::Op::Reply, e.user_data, Status::BadRequest);
    return;
  }
  const PendingCall call = *found;
  calls_.erase(e.token);  // a token is good for one reply
  ClientSession* caller = call.caller_gone ? nullptr : client(call.caller);
  if (caller == nullptr) {
    complete(c, shm::Op::Reply, e.user_data, Status::CallerGone);
    return;
  }
  if (e.length > call.resp_length) {
    // Both sides learn it; the caller's length says what it would have needed.
    complete(*caller, shm::Op::Call, call.user_data, Status::ResponseTooLarge, 0, e.length);
    complete(c, shm::Op::Reply, e.user_data, Status::ResponseTooLarge);
    return;
  }
  if (e.length != 0) {
    std::memcpy(caller->at(call.resp_offset), c.at(e.offset), e.length);
    bump(counters_.bytes_copied, e.length);
  }
  bump(counters_.replies);
  complete(*caller, shm::Op::Call, call.user_data, Status::Ok, 0, e.length);
  complete(c, shm::Op::Reply, e.user_data, Status::Ok);
}

void Engine::op_release(ClientSession& c, const shm::SqEntry& e) {
  const Status s = c.rx.free(e.offset);
  if (s != Status::Ok) bump(counters_.bad_requests);
  if (s == Status::Ok && (e.flags & shm::kSqFlagQuiet) != 0) {
    if (c.outstanding != 0) --c.outstanding;
    bump(counters_.ops_completed);
    return;
  }
  complete(c, shm::Op::ReleaseRx, e.user_data, s);
}

void Engine::fail_calls_of(ClientSession& gone) {
  const std::uint32_t id = gone.id();
  calls_.sweep([&](PendingCall& call) {
    if (call.server == id) {
      // The server died before replying: the caller hears ServiceGone.
      ClientSession* caller = call.caller_gone ? nullptr : client(call.caller);
      if (caller != nullptr && caller != &gone) complete(*caller, shm::Op::Call, call.user_data, Status::ServiceGone);
      return true;
    }
    if (call.caller == id) call.caller_gone = true;  // a later reply gets CallerGone
    return false;
  });
}

}  // namespace ferry::daemon
