// The completion side: pop CQ entries in batches, validate what the daemon
// wrote (it is shared memory: never trusted), and translate to Completion.
// Once the daemon is gone, every op still in flight completes with
// DaemonGone exactly once (after whatever the CQ already held). Waiting is
// part of it: the consumer half of ring.h's doorbell protocol on the CQ,
// plus hang-up detection on the attach socket. Both fds sit in one epoll
// set, which is also what event_fd() hands to applications.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "client/src/client_impl.h"
#include "shm/segment_layout.h"

namespace ferry {

namespace {

static_assert(static_cast<std::uint8_t>(OpKind::ReleaseRx) == static_cast<std::uint8_t>(shm::Op::ReleaseRx));
static_assert(static_cast<std::uint8_t>(OpKind::Call) == static_cast<std::uint8_t>(shm::Op::Call));

}  // namespace

bool Client::Impl::translate(const shm::CqEntry& e, Completion& out) noexcept {
  switch (static_cast<shm::CqKind>(e.kind)) {
    case shm::CqKind::OpDone: {
      if (e.user_data == kReleaseUserData) {
        // A quiet release the daemon rejected: a double release by the app, or a daemon bug.
        if (counters_.release_failures++ == 0)
          log_.say(LogLevel::Warn, "the daemon rejected a ReleaseRx (%s)",
                   to_string(static_cast<Status>(std::min<std::uint8_t>(e.status, kMaxStatus))).data());
        return false;
      }
      const std::uint32_t i = inflight_.lookup(e.user_data);
      if (i == client_detail::InflightTable::kNone) break;
      client_detail::InflightSlot& s = inflight_[i];
      Status status = e.status <= kMaxStatus ? static_cast<Status>(e.status) : Status::ProtocolError;
      if (e.op != static_cast<std::uint8_t>(client_detail::wire_op(s.op))) status = Status::ProtocolError;
      if (s.internal) {
        s.done = true;
        s.result = status;
        s.result_handle = e.handle;
        return false;
      }
      if (s.abandoned) {
        if (s.internal_buffer != 0) (void)tx_.free(s.internal_buffer);
        inflight_.release(i);
        return false;
      }
      out = Completion{};
      out.kind = Completion::Kind::OpDone;
      out.status = status;
      out.op = s.op;
      out.user_data = s.user_data;
      out.handle = e.handle;
      out.length = e.length;
      if (s.op == OpKind::Call && status == Status::Ok) {
        if (e.length > s.response_capacity) {
          out.status = Status::ProtocolError;  // the daemon claims it wrote past the buffer
          out.length = 0;
        } else {
          out.data = s.response;
        }
      }
      inflight_.release(i);
      return true;
    }
    case shm::CqKind::Message:
    case shm::CqKind::Request: {
      if (e.capacity == 0 || e.length > e.capacity || e.length > max_message_ ||
          !shm::range_inside(e.offset, e.capacity, rx_offset_, rx_bytes_)) {
        break;
      }
      fill_delivery(e, out);
      out.data = seg_.view.at(e.offset);
      out.rx_offset = e.offset;
      out.rx_capacity = e.capacity;
      return true;
    }
  }
  if (counters_.dropped_completions++ == 0) {
    log_.say(LogLevel::Warn, "dropped an invalid completion from the daemon (kind %u, offset %llu, length %u)",
             unsigned{e.kind}, static_cast<unsigned long long>(e.offset), unsigned{e.length});
  }
  return false;
}

void Client::Impl::fill_delivery(const shm::CqEntry& e, Completion& out) noexcept {
  out = Completion{};
  out.kind =
      e.kind == static_cast<std::uint8_t>(shm::CqKind::Message) ? Completion::Kind::Message : Completion::Kind::Request;
  out.handle = e.handle;
  out.length = e.length;
  out.token = e.token;
  out.source = e.source;
  if ((e.caller_flags & shm::kCallerLocal) != 0) {
    out.caller = Completion::Caller::Local;
    out.caller_uid = e.caller_uid;
  } else if ((e.caller_flags & shm::kCallerRemote) != 0) {
    out.caller = Completion::Caller::Remote;
  }
}

std::uint32_t Client::Impl::take_inline(const shm::CqEntry& e, const shm::CqEntry* more, std::uint32_t popped,
                                        Completion& out, bool& translated) noexcept {
  translated = false;
  const bool delivery = e.kind == static_cast<std::uint8_t>(shm::CqKind::Message) ||
                        e.kind == static_cast<std::uint8_t>(shm::CqKind::Request);
  if (!delivery || e.length > shm::kInlineMaxBytes) {
    // Where the next entry starts is unknown now: nothing after it can be read.
    cq_broken_ = true;
    if (state_ == Status::Ok) {
      log_.say(LogLevel::Error, "the daemon posted a malformed inline completion (kind %u, length %u); detaching",
               unsigned{e.kind}, unsigned{e.length});
      state_ = Status::DaemonGone;
    }
    return popped;
  }
  constexpr std::uint32_t kSlot = sizeof(shm::CqEntry);
  const std::uint32_t slots = shm::inline_slots(e.length);
  const std::uint32_t from_popped = std::min(slots, popped);
  std::byte scratch[shm::kInlineMaxBytes];
  std::byte* const slot = inline_.take();
  std::byte* const to = slot != nullptr ? slot : scratch;
  const std::uint32_t first = std::min(e.length, from_popped * kSlot);
  std::memcpy(to, more, first);
  if (first < e.length && !cq_.pop_bytes(to + first, e.length - first)) {
    if (slot != nullptr) (void)inline_.give_back(slot);
    cq_broken_ = true;
    if (state_ == Status::Ok) {
      log_.say(LogLevel::Error, "the daemon published an inline completion without its payload; detaching");
      state_ = Status::DaemonGone;
    }
    return from_popped;
  }
  if (slot == nullptr) {
    if (counters_.dropped_completions++ == 0)
      log_.say(LogLevel::Warn, "dropped an inline delivery past the daemon's window (length %u)", unsigned{e.length});
    return from_popped;
  }
  fill_delivery(e, out);
  out.data = slot;
  ++counters_.inline_deliveries;
  translated = true;
  return from_popped;
}

std::size_t Client::Impl::sweep_gone(std::span<Completion> out) noexcept {
  std::size_t n = 0;
  for (std::uint32_t i = 0; i < inflight_.size() && inflight_.live() != 0 && n < out.size(); ++i) {
    client_detail::InflightSlot& s = inflight_[i];
    if (!s.live) continue;
    if (s.internal) {  // its blocking waiter collects it
      if (!s.done) {
        s.done = true;
        s.result = state_;
      }
      continue;
    }
    if (s.abandoned) {
      if (s.internal_buffer != 0) (void)tx_.free(s.internal_buffer);
      inflight_.release(i);
      continue;
    }
    Completion& c = out[n++];
    c = Completion{};
    c.kind = Completion::Kind::OpDone;
    c.status = state_;
    c.op = s.op;
    c.user_data = s.user_data;
    inflight_.release(i);
  }
  return n;
}

std::size_t Client::Impl::poll(std::span<Completion> out) noexcept {
  if (out.empty()) return 0;
  std::size_t n = 0;
  while (n < out.size() && !stash_.empty()) {
    out[n++] = stash_.front();
    stash_.pop();
  }
  if (state_ == Status::Ok && !releases_.empty()) flush_releases();
  bool cq_empty = false;
  for (;;) {
    while (n < out.size() && !cq_broken_) {
      shm::CqEntry batch[kCqBatch];
      const auto want = static_cast<std::uint32_t>(std::min<std::size_t>(kCqBatch, out.size() - n));
      const std::uint32_t got = cq_.pop_batch(batch, want);
      for (std::uint32_t i = 0; i < got && !cq_broken_;) {
        const shm::CqEntry& e = batch[i++];
        if ((e.flags & shm::kCqFlagInline) != 0) {
          bool translated = false;
          i += take_inline(e, batch + i, got - i, out[n], translated);
          if (translated) ++n;
        } else if (translate(e, out[n])) {
          ++n;
        }
      }
      if (got < want || cq_broken_) {
        cq_empty = true;
        break;
      }
    }
    if (cq_.corrupt() && state_ == Status::Ok) {
      log_.say(LogLevel::Error, "the daemon published a corrupt completion ring head; detaching");
      state_ = Status::DaemonGone;
    }
    if (n != 0 || state_ != Status::Ok || busy_poll_ || cq_.announced()) break;
    // Empty: announce that we may sleep, so the daemon rings the doorbell
    // for the next completion (an external epoll on event_fd() relies on
    // it; a busy_poll client does not). Drain stale rings first so
    // event_fd() is not readable for nothing. Work that raced in is popped
    // on the next turn.
    cq_bell_.drain();
    if (cq_.prepare_to_sleep()) {
      check_hangup();
      empty_polls_ = 0;
      break;
    }
  }
  if (n == 0 && state_ == Status::Ok && ++empty_polls_ % 32 == 0) check_hangup();
  if (state_ != Status::Ok && cq_empty && n < out.size()) n += sweep_gone(out.subspan(n));
  if (n != 0) {
    empty_polls_ = 0;
    if (cq_.announced()) cq_.woke_up();
  }
  return n;
}

void Client::Impl::check_hangup() noexcept {
  if (state_ != Status::Ok) return;
  pollfd p{socket_fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return;
  bool gone = (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
  if (!gone && (p.revents & POLLIN) != 0) {
    // The daemon sends nothing after the attach reply; read and drop
    // anything it does send, and treat end-of-stream as hang-up.
    char scratch[64];
    const ssize_t r = ::recv(socket_fd_, scratch, sizeof scratch, MSG_DONTWAIT);
    gone = r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
  }
  if (gone) {
    log_.say(LogLevel::Info, "the daemon connection closed; %u operations in flight fail with DaemonGone",
             inflight_.live());
    state_ = Status::DaemonGone;
  }
}

Status Client::Impl::current_state() noexcept {
  // A look is one poll(2) on the socket; the clock read (vDSO) keeps a
  // caller that asks in a tight loop from paying it every time.
  constexpr auto kHangupLookEvery = std::chrono::milliseconds(1);
  if (state_ != Status::Ok) return state_;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_hangup_look_ >= kHangupLookEvery) {
    last_hangup_look_ = now;
    check_hangup();
  }
  return state_;
}

void Client::Impl::detach() noexcept {
  if (socket_fd_ < 0) return;
  ::close(socket_fd_);  // also leaves the epoll set; the daemon sees the hang-up
  socket_fd_ = -1;
  if (state_ == Status::Ok) state_ = Status::Cancelled;
  log_.say(LogLevel::Debug, "detached; %u operations in flight complete Cancelled", inflight_.live());
}

void Client::Impl::sleep_for_cq(int timeout_ms) noexcept {
  // The announcement lives in the ring header only: the daemon claims it
  // when it rings (for a completion a control op's pump may already have
  // taken), so look there, not at a copy of our own.
  if (!cq_.announced()) {
    cq_bell_.drain();
    if (!cq_.prepare_to_sleep()) return;  // work arrived: do not sleep
  }
  epoll_event events[2];
  const int n = ::epoll_wait(epoll_fd_, events, 2, timeout_ms);
  for (int i = 0; i < n; ++i) {
    if (events[i].data.fd == socket_fd_) {
      check_hangup();
    } else {
      cq_bell_.drain();
    }
  }
}

std::size_t Client::Impl::wait(std::span<Completion> out, std::chrono::milliseconds timeout) noexcept {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  for (;;) {
    const std::size_t n = poll(out);
    if (n != 0 || state_ != Status::Ok || out.empty()) return n;
    const auto left = deadline - clock::now();
    if (left <= clock::duration::zero()) return 0;
    // Round up: a sub-millisecond remainder must still sleep, not spin.
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    sleep_for_cq(static_cast<int>(std::min<long long>(ms, 1 << 30)));
  }
}

}  // namespace ferry
