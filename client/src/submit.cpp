// The submission side: tx arena blocks and SQ entries. Nothing on the
// datapath here allocates or blocks; a full SQ or in-flight table is
// reported as Busy. The blocking control operations (serve, unserve, open,
// close) are submissions too: submit, then wait for that op's own OpDone.
// Completions that arrive meanwhile are kept in the stash, which poll()
// returns first, so nothing is lost or reordered.
#include <algorithm>
#include <cstring>

#include "client/src/client_impl.h"
#include "shm/segment_layout.h"

namespace ferry {

namespace {

shm::SqEntry make_entry(shm::Op op, std::uint32_t handle, std::uint64_t user_data) noexcept {
  shm::SqEntry e{};
  e.op = static_cast<std::uint8_t>(op);
  e.handle = handle;
  e.user_data = user_data;
  return e;
}

}  // namespace

Buffer Client::Impl::alloc(std::size_t bytes) noexcept {
  if (bytes == 0 || bytes > shm::kSlabBytes) return {};
  auto block = tx_.alloc(static_cast<std::uint32_t>(bytes));
  if (!block) return {};
  return Buffer{seg_.view.at(block->offset), block->capacity, block->offset};
}

// At most half the tx arena, and only while an eighth of it (2 slabs at
// least) stays free beside the span: the calls whose responses fill it, and
// whatever else is in flight, need room for their requests. Two pulls that
// each take half would otherwise leave none, and with no call in flight to
// give any back the second could never send (the caller stages it instead).
Buffer Client::Impl::alloc_span(std::size_t bytes) noexcept {
  if (bytes > tx_bytes_ / 2) return {};
  const std::uint64_t reserve = std::max<std::uint64_t>(2 * shm::kSlabBytes, tx_bytes_ / 8);
  const std::uint64_t span = (bytes + shm::kSlabBytes - 1) / shm::kSlabBytes * shm::kSlabBytes;
  if (tx_.stats().free_slabs * shm::kSlabBytes < span + reserve) return {};
  auto block = tx_.alloc_span(bytes);
  if (!block) return {};
  return Buffer{seg_.view.at(block->offset), block->capacity, block->offset};
}

Status Client::Impl::free(Buffer buffer) noexcept {
  if (!buffer) return Status::BadRequest;
  return tx_.free(buffer.offset);
}

// A buffer on its face: a live-looking tx range whose pointer matches its offset.
bool Client::Impl::tx_range_ok(const Buffer& b, std::uint32_t length) const noexcept {
  return b.data == seg_.view.at(b.offset) && length <= b.capacity &&
         shm::range_inside(b.offset, b.capacity, tx_offset_, tx_bytes_);
}

bool Client::Impl::push(const shm::SqEntry& e) noexcept {
  if (!sq_.try_push(e)) return false;
  if (sq_.claim_doorbell()) sq_bell_.ring();
  return true;
}

void Client::Impl::flush_releases() noexcept {
  while (!releases_.empty()) {
    shm::SqEntry e = make_entry(shm::Op::ReleaseRx, 0, kReleaseUserData);
    e.flags = shm::kSqFlagQuiet;
    e.offset = releases_.front();
    if (!push(e)) return;
    releases_.pop();
  }
}

Status Client::Impl::send(EndpointId ep, const Buffer& msg, std::uint32_t length, std::uint64_t user_data) noexcept {
  if (state_ != Status::Ok) return state_;
  if (length == 0 || length > max_message_ || !tx_range_ok(msg, length)) return Status::BadRequest;
  flush_releases();
  const std::uint32_t slot = inflight_.acquire(OpKind::Send, user_data);
  if (slot == client_detail::InflightTable::kNone) return Status::Busy;
  shm::SqEntry e = make_entry(shm::Op::Send, ep, inflight_.token(slot));
  e.offset = msg.offset;
  e.length = length;
  if (!push(e)) {
    inflight_.release(slot);
    return Status::Busy;
  }
  return Status::Ok;
}

Status Client::Impl::call(EndpointId ep, const Buffer& req, std::uint32_t length, const Buffer& resp,
                          std::uint64_t user_data, std::chrono::milliseconds timeout) noexcept {
  if (state_ != Status::Ok) return state_;
  if (length == 0 || length > max_message_ || !tx_range_ok(req, length)) return Status::BadRequest;
  if (timeout.count() < 0 || timeout.count() > shm::kMaxCallTimeoutMs) return Status::BadRequest;
  if (resp && !tx_range_ok(resp, resp.capacity)) return Status::BadRequest;
  flush_releases();
  const std::uint32_t slot = inflight_.acquire(OpKind::Call, user_data);
  if (slot == client_detail::InflightTable::kNone) return Status::Busy;
  inflight_[slot].response = resp.data;
  inflight_[slot].response_capacity = resp ? resp.capacity : 0;
  shm::SqEntry e = make_entry(shm::Op::Call, ep, inflight_.token(slot));
  e.offset = req.offset;
  e.length = length;
  e.resp_offset = resp ? resp.offset : 0;
  e.resp_length = resp ? resp.capacity : 0;
  e.timeout_ms = static_cast<std::uint32_t>(timeout.count());
  if (!push(e)) {
    inflight_.release(slot);
    return Status::Busy;
  }
  return Status::Ok;
}

Status Client::Impl::reply(std::uint64_t token, const Buffer& resp, std::uint32_t length,
                           std::uint64_t user_data) noexcept {
  if (state_ != Status::Ok) return state_;
  if (length > max_message_) return Status::BadRequest;
  if (length != 0 && !tx_range_ok(resp, length)) return Status::BadRequest;
  flush_releases();
  const std::uint32_t slot = inflight_.acquire(OpKind::Reply, user_data);
  if (slot == client_detail::InflightTable::kNone) return Status::Busy;
  shm::SqEntry e = make_entry(shm::Op::Reply, 0, inflight_.token(slot));
  e.token = token;
  e.offset = length != 0 ? resp.offset : 0;
  e.length = length;
  if (!push(e)) {
    inflight_.release(slot);
    return Status::Busy;
  }
  return Status::Ok;
}

void Client::Impl::release(const Completion& delivery) noexcept {
  if (delivery.kind == Completion::Kind::OpDone || state_ != Status::Ok) return;
  if (inline_.holds(delivery.data)) {
    // Inline: counted, not submitted (inline_store.h).
    if (!inline_.give_back(delivery.data)) {
      if (counters_.release_failures++ == 0) log_.say(LogLevel::Warn, "an inline delivery was released twice");
      return;
    }
    cq_.publish_released(inline_.given_back());
    return;
  }
  // Order does not matter for releases, but queued ones go first so the queue drains.
  flush_releases();
  if (releases_.empty()) {
    shm::SqEntry e = make_entry(shm::Op::ReleaseRx, 0, kReleaseUserData);
    e.flags = shm::kSqFlagQuiet;
    e.offset = delivery.rx_offset;
    if (push(e)) return;
  }
  ++counters_.deferred_releases;
  // The queue holds one slot per possible rx block, so it cannot overflow
  // unless the caller releases a delivery twice.
  (void)releases_.push(delivery.rx_offset);
}

Result<std::uint32_t> Client::Impl::control(OpKind op, std::uint32_t handle, std::string_view payload,
                                            std::chrono::milliseconds timeout) noexcept {
  using R = Result<std::uint32_t>;
  using clock = std::chrono::steady_clock;
  if (state_ != Status::Ok) return R::fail(state_);
  Buffer buf;
  if (!payload.empty()) {
    buf = alloc(payload.size());
    if (!buf) return R::fail(Status::NoMemory);
    std::memcpy(buf.data, payload.data(), payload.size());
  }
  const std::uint32_t slot = inflight_.acquire(op, 0);
  if (slot == client_detail::InflightTable::kNone) {
    if (buf) (void)tx_.free(buf.offset);
    return R::fail(Status::Busy);
  }
  client_detail::InflightSlot& s = inflight_[slot];
  s.internal = true;
  s.internal_buffer = buf ? buf.offset : 0;

  shm::SqEntry e{};
  e.op = static_cast<std::uint8_t>(client_detail::wire_op(op));
  e.handle = handle;
  e.user_data = inflight_.token(slot);
  e.offset = buf ? buf.offset : 0;
  e.length = static_cast<std::uint32_t>(payload.size());

  const auto deadline = clock::now() + timeout;
  bool submitted = false;
  while (!s.done) {
    if (!submitted) {
      flush_releases();
      submitted = push(e);
    }
    // Pump the CQ: our OpDone marks the slot done; everything else is kept.
    while (!stash_.full()) {
      shm::CqEntry c;
      if (cq_.pop_batch(&c, 1) == 0) break;
      Completion out;
      if (translate(c, out)) (void)stash_.push(out);
    }
    if (s.done) break;
    if (state_ != Status::Ok) {
      if (cq_.ready() == 0 || stash_.full()) {
        s.done = true;
        s.result = state_;
      }
      continue;
    }
    const auto left = deadline - clock::now();
    if (left <= clock::duration::zero()) {
      if (!submitted) {
        if (buf) (void)tx_.free(buf.offset);
        inflight_.release(slot);
        return R::fail(Status::Busy);
      }
      // The daemon may still read the payload: the buffer and slot are
      // reclaimed when the late OpDone (or DaemonGone) arrives.
      s.internal = false;
      s.abandoned = true;
      return R::fail(Status::Timeout);
    }
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    sleep_for_cq(static_cast<int>(std::min<long long>(ms, submitted ? 1 << 30 : 1)));
  }
  const Status result = s.result;
  const std::uint32_t id = s.result_handle;
  if (s.internal_buffer != 0) (void)tx_.free(s.internal_buffer);
  inflight_.release(slot);
  if (result != Status::Ok) return R::fail(result);
  if ((op == OpKind::Serve || op == OpKind::Open) && id == 0) return R::fail(Status::ProtocolError);
  return R::ok(id);
}

}  // namespace ferry
