// TcpTransport datapath: post_send (encode into the send ring, one writev per
// connection per batch) and poll (readiness, send reports, framing of
// received bytes). No allocation, no locks, no exceptions.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/tcp/tcp_transport.h"

namespace ferry::transport::tcp {

PostResult TcpTransport::post_send(std::span<const SendWr> wrs) noexcept {
  owner_.check();
  PostResult result;
  for (const SendWr& wr : wrs) {
    TcpConnection* c = lookup(wr.conn);
    if (c == nullptr || c->state != ConnState::Open) {
      result.status = Status::EndpointClosed;
      break;
    }
    if (wr.op != WrOp::Send || wr.prefix_len != 0) {  // prefixes only carry rdma descriptors
      result.status = Status::NotSupported;
      break;
    }
    if (wr.payload_len > config_.max_message_bytes || (wr.payload == nullptr && wr.payload_len != 0)) {
      result.status = Status::BadRequest;
      break;
    }
    wire::Header h = wr.header;
    h.payload_len = wr.payload_len;
    // The peer kills the channel on an invalid header; refuse it here so the
    // bug is reported to the sender instead.
    if (wire::validate_header(h, config_.max_message_bytes) != wire::WireError::None) {
      result.status = Status::BadRequest;
      break;
    }
    if (c->sq_used() == kSendQueueDepth) {
      result.status = Status::Busy;
      break;
    }
    if (c->sq_head == c->sq_tail) c->sq_head = c->sq_written = c->sq_tail = 0;  // empty: the hot entries again
    PendingWr& p = c->sq_at(c->sq_tail);
    wire::encode_header(h, p.header);
    p.payload = wr.payload;
    p.payload_len = wr.payload_len;
    p.signaled = wr.signaled;
    p.user_data = wr.user_data;
    ++c->sq_tail;
    // One predictable branch when no test armed a fault (tcp_fault.h).
    if (fault_.armed()) [[unlikely]]
      inject_fault(*c, p, (wr.conn & 0xFFFFu) - 1, h.type);
    touched_.set((wr.conn & 0xFFFFu) - 1);
    ++result.accepted;
  }
  // Usually one or two connections per batch: the sweep reads the mask's
  // words once and leaves it empty for the next call.
  for (std::uint32_t slot = touched_.next(0); slot != decltype(touched_)::kNone; slot = touched_.next(slot + 1)) {
    touched_.clear(slot);
    flush(slot);
  }
  return result;
}

void TcpTransport::flush(std::uint32_t slot) noexcept {
  TcpConnection& c = conns_[slot];
  while (c.state == ConnState::Open && c.sq_written != c.sq_tail) {
    // Gather as many queued frames as the iovec array holds.
    std::size_t iovcnt = 0;
    std::size_t offered = 0;
    std::uint32_t skip = c.write_offset;
    for (std::uint32_t i = c.sq_written; i != c.sq_tail && iovcnt + 2 <= kMaxIov; ++i) {
      PendingWr& p = c.sq_at(i);
      if (skip < wire::kHeaderBytes) {
        iov_[iovcnt++] = {p.header.data() + skip, wire::kHeaderBytes - skip};
        offered += wire::kHeaderBytes - skip;
        skip = 0;
      } else {
        skip -= static_cast<std::uint32_t>(wire::kHeaderBytes);
      }
      if (p.payload_len > skip) {
        iov_[iovcnt++] = {const_cast<std::byte*>(p.payload) + skip, p.payload_len - skip};
        offered += p.payload_len - skip;
      }
      skip = 0;
    }
    msghdr msg{};
    msg.msg_iov = iov_.data();
    msg.msg_iovlen = iovcnt;
    const ssize_t r = ::sendmsg(c.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        set_want_write(slot, true);
        return;
      }
      begin_drain(slot, Status::PeerReset);  // EPIPE, ECONNRESET, ...
      return;
    }
    if constexpr (FERRY_DATAPATH_STATS) {
      ++stats_.writev_calls;
      stats_.bytes_sent += static_cast<std::uint64_t>(r);
    }
    // Advance over what went out; whole frames move to [head, written).
    auto left = static_cast<std::size_t>(r);
    while (left > 0) {
      const std::size_t rest = c.sq_at(c.sq_written).frame_bytes() - c.write_offset;
      if (left < rest) {
        c.write_offset += static_cast<std::uint32_t>(left);
        break;
      }
      left -= rest;
      c.write_offset = 0;
      ++c.sq_written;
    }
    if (static_cast<std::size_t>(r) < offered) {
      // The socket buffer is full: wait for EPOLLOUT instead of spinning.
      if constexpr (FERRY_DATAPATH_STATS) ++stats_.partial_writes;
      set_want_write(slot, true);
      break;
    }
  }
  if (c.sq_written == c.sq_tail) set_want_write(slot, false);
  if (c.sq_head != c.sq_written) attention_.set(slot);
}

std::size_t TcpTransport::report_sends(std::uint32_t slot, std::span<Completion> out) noexcept {
  TcpConnection& c = conns_[slot];
  std::size_t n = 0;
  const ConnId id = id_of(slot);
  while (c.sq_head != c.sq_written && n < out.size()) {
    const PendingWr& p = c.sq_at(c.sq_head++);
    if (!p.signaled) continue;
    out[n] = Completion{};
    out[n].kind = CompletionKind::SendDone;
    out[n].conn = id;
    out[n].user_data = p.user_data;
    ++n;
  }
  if (c.state != ConnState::Draining) return n;
  // Whatever never fully left fails, signaled or not: the owner must learn
  // that those payload buffers are free and the data was not delivered.
  const Status why = c.close_status == Status::Ok ? Status::Cancelled : c.close_status;
  while (c.sq_head != c.sq_tail && n < out.size()) {
    const PendingWr& p = c.sq_at(c.sq_head++);
    out[n] = Completion{};
    out[n].kind = CompletionKind::SendDone;
    out[n].status = why;
    out[n].conn = id;
    out[n].user_data = p.user_data;
    ++n;
  }
  c.sq_written = c.sq_head;
  return n;
}

bool TcpTransport::take_frames(std::uint32_t slot, std::byte* buf, std::size_t& begin, std::size_t end,
                               std::span<Completion> out, std::size_t& n) noexcept {
  const ConnId id = id_of(slot);
  while (n < out.size() && end - begin >= wire::kHeaderBytes) {
    wire::Header h;
    const std::span<const std::byte> avail(buf + begin, end - begin);
    const wire::WireError e = wire::decode_header(avail, config_.max_message_bytes, h);
    if (e != wire::WireError::None) {
      begin_drain(slot, wire::to_status(e) == Status::Ok ? Status::ProtocolError : wire::to_status(e));
      return false;
    }
    const std::size_t frame = wire::kHeaderBytes + h.payload_len;
    if (avail.size() < frame) break;
    out[n] = Completion{};
    out[n].kind = CompletionKind::Recv;
    out[n].conn = id;
    out[n].header = h;
    out[n].payload = buf + begin + wire::kHeaderBytes;
    ++n;
    begin += frame;
    guard_.spoke(slot);  // an accepted connection's first frame ends its deadline
  }
  return true;
}

std::size_t TcpTransport::receive(std::uint32_t slot, std::span<Completion> out) noexcept {
  TcpConnection& c = conns_[slot];
  const std::size_t cap = config_.rx_buffer_bytes();
  // Pointers handed out by the previous poll() expire now: compact.
  if (c.rx_begin == c.rx_end) {
    c.rx_begin = c.rx_end = 0;
  } else if (c.rx_begin > 0) {
    std::memmove(c.rx, c.rx + c.rx_begin, c.rx_end - c.rx_begin);
    c.rx_end -= c.rx_begin;
    c.rx_begin = 0;
  }
  std::size_t n = 0;
  // A read shorter than asked emptied the socket: the epoll set (level
  // triggered) reports the next bytes, so another read now would only say
  // EAGAIN, a system call per message for nothing.
  bool drained = false;
  // Nothing buffered: the first read goes to this poll's shared landing
  // buffer. Frames that arrive whole (an idle connection's heartbeats, most
  // small messages) are handed out from there; only a partial frame, or
  // frames `out` has no room for, are copied into the connection's own
  // buffer, which so commits pages only for what it has to hold. Once that
  // happened (rx_direct) the connection carries large frames and its
  // buffer's pages are committed: it reads there directly.
  if (c.rx_end == 0 && !c.rx_direct && kLandingBytes - landing_used_ >= kLandingReadBytes) {
    std::byte* land = landing_.get() + landing_used_;
    ssize_t r = 0;
    do {
      r = ::recv(c.fd, land, kLandingReadBytes, MSG_DONTWAIT);
    } while (r < 0 && errno == EINTR);
    if constexpr (FERRY_DATAPATH_STATS) ++stats_.read_calls;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (r <= 0) {
      begin_drain(slot, Status::PeerReset);  // 0: orderly close by the peer; <0: reset
      return 0;
    }
    if constexpr (FERRY_DATAPATH_STATS) stats_.bytes_received += static_cast<std::uint64_t>(r);
    const auto got = static_cast<std::size_t>(r);
    landing_used_ += got;  // the frames handed out from it live until the next poll
    std::size_t off = 0;
    if (!take_frames(slot, land, off, got, out, n)) return n;
    if (off < got) {
      std::memcpy(c.rx, land + off, got - off);
      c.rx_end = got - off;
      c.rx_direct = true;
    }
    drained = got < kLandingReadBytes;
  }
  for (;;) {
    if (!take_frames(slot, c.rx, c.rx_begin, c.rx_end, out, n)) return n;
    if (n == out.size()) {
      attention_.set(slot);  // buffered frames may remain
      return n;
    }
    if (drained) return n;
    if (c.rx_end == cap) {
      // Full because frames handed out in this poll pin the front; the next
      // poll compacts. The socket stays readable, so epoll will say so too.
      attention_.set(slot);
      return n;
    }
    const std::size_t room = cap - c.rx_end;
    const ssize_t r = ::recv(c.fd, c.rx + c.rx_end, room, MSG_DONTWAIT);
    if constexpr (FERRY_DATAPATH_STATS) ++stats_.read_calls;
    if (r > 0) {
      if constexpr (FERRY_DATAPATH_STATS) stats_.bytes_received += static_cast<std::uint64_t>(r);
      c.rx_end += static_cast<std::size_t>(r);
      drained = static_cast<std::size_t>(r) < room;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return n;
    begin_drain(slot, Status::PeerReset);  // 0: orderly close by the peer; <0: reset
    return n;
  }
}

bool TcpTransport::needs_attention(const TcpConnection& c) const noexcept {
  return c.state == ConnState::Draining || c.sq_head != c.sq_written;
}

std::size_t TcpTransport::service(std::uint32_t slot, std::span<Completion> out) noexcept {
  TcpConnection& c = conns_[slot];
  attention_.clear(slot);  // re-set below by whatever still has work
  std::size_t n = 0;
  if (c.state == ConnState::Connecting) connecting_done(slot, out, n);
  if (c.state == ConnState::Connecting) return n;
  if (c.state == ConnState::Open && c.sq_written != c.sq_tail) flush(slot);
  n += report_sends(slot, out.subspan(n));
  if (c.state == ConnState::Open && n < out.size()) n += receive(slot, out.subspan(n));
  if (c.state == ConnState::Draining && c.sq_head == c.sq_tail && n < out.size()) {
    out[n] = Completion{};
    out[n].kind = CompletionKind::Closed;
    out[n].status = c.close_status;
    out[n].conn = id_of(slot);
    ++n;
    free_slot(slot);
    return n;
  }
  if (c.state != ConnState::Free && needs_attention(c)) attention_.set(slot);
  return n;
}

std::size_t TcpTransport::poll(std::span<Completion> out) noexcept {
  owner_.check();
  if (out.empty()) return 0;
  landing_used_ = 0;  // the payloads the last poll handed out expire now
  if (freed_.any()) [[unlikely]]
    release_freed();
  const int ready = ::epoll_wait(epoll_fd_, events_.data(), static_cast<int>(events_.size()), 0);
  for (int i = 0; i < ready; ++i) {
    if (events_[i].data.u64 == kListenerTag) {
      accept_pending_ = true;
    } else if (events_[i].data.u64 == kTimerTag) {
      timer_due_ = true;
    } else {
      attention_.set(static_cast<std::uint32_t>(events_[i].data.u64));
    }
  }
  std::size_t n = 0;
  if (accept_pending_) n += accept_ready(out);
  if (connecting_ != 0) expire_connects();
  if (timer_due_) expire_silent();  // before the sweep: their Closed goes out in this poll
  // Sweep the set bits from a rotating start, [start, count) then
  // [0, start), so a busy low slot cannot starve the rest when `out` is
  // small. Each slot is serviced at most once per poll: a bit service()
  // sets again waits for the next one.
  const std::uint32_t count = config_.max_connections;
  const std::uint32_t start = next_slot_;
  constexpr std::uint32_t kNone = decltype(attention_)::kNone;
  if (attention_.any()) {
    for (std::uint32_t s = attention_.next(start); s != kNone && n < out.size(); s = attention_.next(s + 1)) {
      n += service(s, out.subspan(n));
    }
    for (std::uint32_t s = attention_.next(0); s < start && n < out.size(); s = attention_.next(s + 1)) {
      n += service(s, out.subspan(n));
    }
  }
  next_slot_ = (next_slot_ + 1) % count;
  return n;
}

}  // namespace ferry::transport::tcp
