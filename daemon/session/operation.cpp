#include "daemon/session/operation.h"

namespace ferry::daemon {

Reject parse_operation(const shm::SqEntry& e, const ArenaBounds& bounds, std::uint32_t default_timeout_ms,
                       Operation& out) noexcept {
  if (parse_hot(e, bounds, out)) return Reject::None;
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
