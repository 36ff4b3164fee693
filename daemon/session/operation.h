// One submission, taken out of the client's SQ, checked once against its
// arenas (validate.h) and parsed: the value every component acts on, and
// the one that waits when an op parks or goes again after a refusal.
#pragma once

#include <cstdint>

#include "daemon/session/validate.h"
#include "shm/ring_entries.h"
#include "shm/segment_layout.h"

namespace ferry::daemon {

struct Operation {
  shm::Op op = shm::Op::Nop;
  bool quiet = false;            // ReleaseRx: no OpDone on success
  std::uint32_t handle = 0;      // endpoint or service id, per op
  std::uint32_t timeout_ms = 0;  // Call: its own timeout, else the daemon's call-timeout-ms (0: none)
  std::uint64_t user_data = 0;
  std::uint64_t token = 0;   // Reply: the request's token
  std::uint64_t offset = 0;  // payload (tx arena), or the rx block of a ReleaseRx
  std::uint32_t length = 0;
  std::uint32_t resp_length = 0;  // Call: the response buffer (tx arena)
  std::uint64_t resp_offset = 0;

  bool is_call() const noexcept { return op == shm::Op::Call; }
};

// The datapath's two most frequent entries, a Send and a ReleaseRx, checked
// and parsed in one pass: every rule validate_entry applies to them, in
// fewer branches. False for anything else, or a rule broken (then
// parse_operation goes the full way, which names the rule).
inline bool parse_hot(const shm::SqEntry& e, const ArenaBounds& b, Operation& out) noexcept {
  if ((e.reserved0 | e.reserved2 | e.reserved1 | e.timeout_ms) != 0) return false;
  if (e.op == static_cast<std::uint8_t>(shm::Op::Send)) {
    if (e.flags != 0 || e.handle == 0 || e.length == 0 || e.length > b.max_message_bytes) return false;
    if (!shm::range_inside(e.offset, e.length, b.tx_offset, b.tx_bytes)) return false;
    out.op = shm::Op::Send;
    out.quiet = false;
  } else if (e.op == static_cast<std::uint8_t>(shm::Op::ReleaseRx)) {
    if ((e.flags & ~shm::kSqFlagQuiet) != 0 || !shm::range_inside(e.offset, 1, b.rx_offset, b.rx_bytes)) return false;
    out.op = shm::Op::ReleaseRx;
    out.quiet = (e.flags & shm::kSqFlagQuiet) != 0;
  } else {
    return false;
  }
  out.user_data = e.user_data;
  out.handle = e.handle;
  out.timeout_ms = 0;
  out.token = e.token;
  out.offset = e.offset;
  out.length = e.length;
  out.resp_length = 0;
  out.resp_offset = 0;
  return true;
}

// Checks `e` (already copied out of shared memory) and fills `out`. Reject
// names why not; `out.op` is then the op to complete BadRequest with.
// `default_timeout_ms`: a Call's timeout when it gives none.
[[nodiscard]] Reject parse_operation(const shm::SqEntry& e, const ArenaBounds& bounds, std::uint32_t default_timeout_ms,
                                     Operation& out) noexcept;

}  // namespace ferry::daemon
