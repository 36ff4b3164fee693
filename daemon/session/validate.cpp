#include "daemon/session/validate.h"

#include "shm/segment_layout.h"

namespace ferry::daemon {

std::string_view to_string(Reject r) noexcept {
  switch (r) {
    case Reject::None: return "None";
    case Reject::UnknownOp: return "UnknownOp";
    case Reject::UnknownFlags: return "UnknownFlags";
    case Reject::QuietNotAllowed: return "QuietNotAllowed";
    case Reject::ReservedNonZero: return "ReservedNonZero";
    case Reject::ZeroHandle: return "ZeroHandle";
    case Reject::NameLength: return "NameLength";
    case Reject::TargetLength: return "TargetLength";
    case Reject::PayloadLength: return "PayloadLength";
    case Reject::PayloadOutsideTx: return "PayloadOutsideTx";
    case Reject::ResponseOutsideTx: return "ResponseOutsideTx";
    case Reject::ReleaseOutsideRx: return "ReleaseOutsideRx";
    case Reject::TimeoutRange: return "TimeoutRange";
  }
  return "Unknown";
}

namespace {

bool in_tx(std::uint64_t offset, std::uint64_t length, const ArenaBounds& b) noexcept {
  return shm::range_inside(offset, length, b.tx_offset, b.tx_bytes);
}

}  // namespace

Reject validate_entry(const shm::SqEntry& e, const ArenaBounds& b) noexcept {
  using shm::Op;
  if (e.op > shm::kMaxOp) return Reject::UnknownOp;
  const Op op = static_cast<Op>(e.op);
  if ((e.flags & ~shm::kSqFlagsKnown) != 0) return Reject::UnknownFlags;
  if ((e.flags & shm::kSqFlagQuiet) != 0 && op != Op::ReleaseRx) return Reject::QuietNotAllowed;
  if (e.reserved0 != 0 || e.reserved2 != 0 || e.reserved1 != 0) return Reject::ReservedNonZero;
  if (e.timeout_ms != 0 && op != Op::Call) return Reject::ReservedNonZero;
  if (e.timeout_ms > shm::kMaxCallTimeoutMs) return Reject::TimeoutRange;

  switch (op) {
    case Op::Nop: return Reject::None;
    case Op::Serve:
      if (e.length == 0 || e.length > kMaxServiceNameBytes) return Reject::NameLength;
      return in_tx(e.offset, e.length, b) ? Reject::None : Reject::PayloadOutsideTx;
    case Op::Unserve:
    case Op::Close: return e.handle == 0 ? Reject::ZeroHandle : Reject::None;
    case Op::Open:
      if (e.length == 0 || e.length > kMaxTargetBytes) return Reject::TargetLength;
      return in_tx(e.offset, e.length, b) ? Reject::None : Reject::PayloadOutsideTx;
    case Op::Send:
    case Op::Call:
      if (e.handle == 0) return Reject::ZeroHandle;
      if (e.length == 0 || e.length > b.max_message_bytes) return Reject::PayloadLength;
      if (!in_tx(e.offset, e.length, b)) return Reject::PayloadOutsideTx;
      if (op == Op::Call && e.resp_length != 0 && !in_tx(e.resp_offset, e.resp_length, b)) {
        return Reject::ResponseOutsideTx;
      }
      return Reject::None;
    case Op::Reply:
      if (e.length > b.max_message_bytes) return Reject::PayloadLength;
      if (e.length != 0 && !in_tx(e.offset, e.length, b)) return Reject::PayloadOutsideTx;
      return Reject::None;
    case Op::ReleaseRx:
      // Whether it is a live block is the allocator's call; here only the arena.
      return shm::range_inside(e.offset, 1, b.rx_offset, b.rx_bytes) ? Reject::None : Reject::ReleaseOutsideRx;
  }
  return Reject::UnknownOp;
}

bool valid_service_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > kMaxServiceNameBytes) return false;
  for (char ch : name) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
              ch == '_' || ch == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace ferry::daemon
