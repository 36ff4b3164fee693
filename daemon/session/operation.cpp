#include "daemon/session/operation.h"

#include "shm/segment_layout.h"

namespace ferry::daemon {

namespace {

// The datapath's two most frequent entries, a Send and a quiet ReleaseRx,
// checked and parsed in one pass: every rule validate_entry applies to
// them, in fewer branches. Anything else (or a rule broken) goes the full
// way, which names the rule.
bool fast_parse(const shm::SqEntry& e, const ArenaBounds& b, Operation& out) noexcept {
  if ((e.reserved0 | e.reserved2 | e.reserved1 | e.timeout_ms) != 0) return false;
  if (e.op == static_cast<std::uint8_t>(shm::Op::Send)) {
    if (e.flags != 0 || e.handle == 0 || e.length == 0 || e.length > b.max_message_bytes) return false;
    if (!shm::range_inside(e.offset, e.length, b.tx_offset, b.tx_bytes)) return false;
    out.op = shm::Op::Send;
  } else if (e.op == static_cast<std::uint8_t>(shm::Op::ReleaseRx)) {
    if ((e.flags & ~shm::kSqFlagQuiet) != 0 || !shm::range_inside(e.offset, 1, b.rx_offset, b.rx_bytes)) return false;
    out.op = shm::Op::ReleaseRx;
    out.quiet = (e.flags & shm::kSqFlagQuiet) != 0;
  } else {
    return false;
  }
  out.user_data = e.user_data;
  out.handle = e.handle;
  out.token = e.token;
  out.offset = e.offset;
  out.length = e.length;
  return true;
}

}  // namespace

Reject parse_operation(const shm::SqEntry& e, const ArenaBounds& bounds, std::uint32_t default_timeout_ms,
                       Operation& out) noexcept {
  if (fast_parse(e, bounds, out)) return Reject::None;
  out.op = static_cast<shm::Op>(e.op <= shm::kMaxOp ? e.op : 0);
  out.user_data = e.user_data;
  const Reject r = validate_entry(e, bounds);
  if (r != Reject::None) return r;
  out.quiet = (e.flags & shm::kSqFlagQuiet) != 0;
  out.handle = e.handle;
  out.timeout_ms = out.op == shm::Op::Call && e.timeout_ms == 0 ? default_timeout_ms : e.timeout_ms;
  out.token = e.token;
  out.offset = e.offset;
  out.length = e.length;
  out.resp_length = out.op == shm::Op::Call ? e.resp_length : 0;
  out.resp_offset = out.op == shm::Op::Call ? e.resp_offset : 0;
  return Reject::None;
}

}  // namespace ferry::daemon
