// Blocking control operations (serve, unserve, open, close): submit, then
// wait for that op's own OpDone. Completions that arrive meanwhile are kept
// in the stash, which poll() returns first, so nothing is lost or reordered.
#include <cstring>

#include "client/src/client_impl.h"

namespace ferry {

namespace {

constexpr shm::Op wire_op(OpKind k) noexcept { return static_cast<shm::Op>(static_cast<std::uint8_t>(k)); }

}  // namespace

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
  e.op = static_cast<std::uint8_t>(wire_op(op));
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
